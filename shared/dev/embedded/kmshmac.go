package embedded

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	_ "unsafe" // go:linkname, for kumo's handler
)

// The dev kit's KMS HMAC keys. kumo's KMS has no GenerateMac or VerifyMac
// and computes no MAC with the key material it keeps, so the embedded
// stack's endpoint puts this handler in front of kumo's (in-process, on the
// same listener). It handles, in the KMS JSON protocol
// (X-Amz-Target: TrentService.<Op>):
//   - CreateKey with an HMAC KeySpec (HMAC_224/256/384/512, KeyUsage
//     GENERATE_VERIFY_MAC): kumo creates the key (its id, ARN, state,
//     aliases, policy, tags, enable/disable and deletion stay kumo's, as for
//     every other key) and the dev kit adds random key material of the
//     spec's length, written to disk before the answer when kumo persists;
//   - DescribeKey (and CreateKey's answer): kumo's answer, with the
//     MacAlgorithms KMS lists for an HMAC key;
//   - GenerateMac and VerifyMac, as the KMS API reference describes them.
//
// Everything else, and every non-HMAC key, goes to kumo unchanged.

//go:linkname kumoHandler github.com/sivchari/kumo.handler
func kumoHandler() http.Handler

// hmacFileName is the dev kit's key material, next to kumo's snapshots.
const hmacFileName = "devkit-kms-hmac.json"

// hmacSpecs maps each HMAC key spec to its MAC algorithm, hash and key
// length in bytes.
var hmacSpecs = map[string]struct {
	alg  string
	hash func() hash.Hash
	size int
}{
	"HMAC_224": {"HMAC_SHA_224", sha256.New224, 28},
	"HMAC_256": {"HMAC_SHA_256", sha256.New, 32},
	"HMAC_384": {"HMAC_SHA_384", sha512.New384, 48},
	"HMAC_512": {"HMAC_SHA_512", sha512.New, 64},
}

const macUsage = "GENERATE_VERIFY_MAC"

// KMS's limits for GenerateMac and VerifyMac.
const (
	maxMacMessage = 4096
	maxMac        = 6144
)

// hmacKey is one key's material.
type hmacKey struct {
	Spec     string `json:"spec"`
	Material []byte `json:"material"`
}

// hmacKMS is the handler in front of kumo's.
type hmacKMS struct {
	next http.Handler
	// file keeps keys across restarts; empty when kumo does not persist.
	file string
	mu   sync.Mutex
	// keys by key ARN.
	keys map[string]hmacKey
}

// newHMACKMS returns the handler in front of next; with a non-empty dir
// (kumo's data dir) it loads and keeps the key material there.
func newHMACKMS(next http.Handler, dir string) (*hmacKMS, error) {
	h := &hmacKMS{next: next, keys: map[string]hmacKey{}}
	if dir == "" {
		return h, nil
	}
	h.file = filepath.Join(dir, hmacFileName)
	if err := loadState(h.file, "dev kit HMAC keys", &h.keys); err != nil {
		return nil, err
	}
	for arn, k := range h.keys {
		if s, ok := hmacSpecs[k.Spec]; !ok || len(k.Material) != s.size {
			return nil, fmt.Errorf("dev kit HMAC keys %s: key %s has spec %q and %d bytes of material (remove the data dir to start afresh)", h.file, arn, k.Spec, len(k.Material))
		}
	}
	return h, nil
}

// kmsError is a KMS error answer.
type kmsError struct {
	status int
	code   string
	msg    string
}

func (e *kmsError) Error() string { return e.code + ": " + e.msg }

func validation(format string, a ...any) *kmsError {
	return &kmsError{http.StatusBadRequest, "ValidationException", fmt.Sprintf(format, a...)}
}

func (h *hmacKMS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
	if !ok || (op != "CreateKey" && op != "DescribeKey" && op != "GenerateMac" && op != "VerifyMac") {
		h.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeKMSError(w, validation("the request body cannot be read: %v", err))
		return
	}
	var out any
	switch op {
	case "CreateKey":
		out, err = h.createKey(r, body)
	case "DescribeKey":
		out, err = h.describeKey(r, body)
	case "GenerateMac":
		out, err = h.generateMac(r, body)
	case "VerifyMac":
		out, err = h.verifyMac(r, body)
	}
	if err != nil {
		var ke *kmsError
		if !errors.As(err, &ke) {
			ke = &kmsError{http.StatusInternalServerError, "KMSInternalException", err.Error()}
		}
		writeKMSError(w, ke)
		return
	}
	writeKMSJSON(w, http.StatusOK, out)
}

func writeKMSError(w http.ResponseWriter, e *kmsError) {
	writeKMSJSON(w, e.status, map[string]string{"__type": e.code, "message": e.msg})
}

func writeKMSJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"__type":"KMSInternalException","message":"encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", requestID())
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// kumo sends one request to kumo's handler, as r with op and body, and
// returns the JSON object it answered; an error answer is a *kmsError.
func (h *hmacKMS) kumo(r *http.Request, op string, body []byte) (map[string]json.RawMessage, error) {
	req := r.Clone(r.Context())
	req.Header.Set("X-Amz-Target", "TrentService."+op)
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, req)
	var out map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("kumo's %s answer (HTTP %d) is not JSON: %w", op, rec.Code, err)
	}
	if rec.Code != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if i := strings.LastIndex(e.Type, "#"); i >= 0 {
			e.Type = e.Type[i+1:]
		}
		return nil, &kmsError{rec.Code, e.Type, e.Message}
	}
	return out, nil
}

// keyMeta is what the dev kit reads of a key's metadata.
type keyMeta struct {
	Arn      string `json:"Arn"`
	KeyState string `json:"KeyState"`
	KeyUsage string `json:"KeyUsage"`
	KeySpec  string `json:"KeySpec"`
}

// withMacAlgorithms adds MacAlgorithms to an HMAC key's metadata in
// answer (CreateKey's, DescribeKey's), as KMS lists them.
func withMacAlgorithms(answer map[string]json.RawMessage) (map[string]json.RawMessage, keyMeta, error) {
	var meta map[string]json.RawMessage
	var km keyMeta
	if err := json.Unmarshal(answer["KeyMetadata"], &meta); err != nil {
		return nil, km, fmt.Errorf("kumo's key metadata: %w", err)
	}
	if err := json.Unmarshal(answer["KeyMetadata"], &km); err != nil {
		return nil, km, fmt.Errorf("kumo's key metadata: %w", err)
	}
	if s, ok := hmacSpecs[km.KeySpec]; ok {
		meta["MacAlgorithms"], _ = json.Marshal([]string{s.alg})
		delete(meta, "EncryptionAlgorithms")
		answer["KeyMetadata"], _ = json.Marshal(meta)
	}
	return answer, km, nil
}

func (h *hmacKMS) createKey(r *http.Request, body []byte) (any, error) {
	var in struct {
		KeySpec               string `json:"KeySpec"`
		CustomerMasterKeySpec string `json:"CustomerMasterKeySpec"`
		KeyUsage              string `json:"KeyUsage"`
		Origin                string `json:"Origin"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, validation("the request body is not a CreateKey request: %v", err)
	}
	spec := in.KeySpec
	if spec == "" {
		spec = in.CustomerMasterKeySpec
	}
	s, isHMAC := hmacSpecs[spec]
	switch {
	case !isHMAC && in.KeyUsage == macUsage:
		return nil, validation("KeyUsage GENERATE_VERIFY_MAC needs an HMAC KeySpec (HMAC_224, HMAC_256, HMAC_384, HMAC_512), not %q", spec)
	case !isHMAC:
		return h.kumo(r, "CreateKey", body)
	case in.KeyUsage != macUsage:
		return nil, validation("KeySpec %s needs KeyUsage GENERATE_VERIFY_MAC, not %q", spec, in.KeyUsage)
	case in.Origin != "" && in.Origin != "AWS_KMS":
		return nil, &kmsError{http.StatusBadRequest, "UnsupportedOperationException", "the dev kit's HMAC keys have Origin AWS_KMS only, not " + in.Origin}
	}
	if in.KeySpec == "" {
		// The deprecated CustomerMasterKeySpec, which kumo does not read.
		var req map[string]json.RawMessage
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, validation("the request body is not a CreateKey request: %v", err)
		}
		delete(req, "CustomerMasterKeySpec")
		req["KeySpec"], _ = json.Marshal(spec)
		body, _ = json.Marshal(req)
	}
	material := make([]byte, s.size)
	if _, err := rand.Read(material); err != nil {
		return nil, fmt.Errorf("key material: %w", err)
	}
	out, err := h.kumo(r, "CreateKey", body)
	if err != nil {
		return nil, err
	}
	out, km, err := withMacAlgorithms(out)
	if err != nil {
		return nil, err
	}
	if km.Arn == "" {
		return nil, errors.New("kumo's CreateKey answer has no key ARN")
	}
	if err := h.add(km.Arn, hmacKey{Spec: spec, Material: material}); err != nil {
		// kumo holds a key without material: nothing answered names it,
		// and GenerateMac refuses it.
		return nil, err
	}
	return out, nil
}

// add keeps a key's material, on disk first when the stack persists.
func (h *hmacKMS) add(arn string, k hmacKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keys[arn] = k
	if h.file == "" {
		return nil
	}
	b, err := json.Marshal(h.keys)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(h.file), 0o700)
	}
	if err == nil {
		err = writeFileAtomic(h.file, b)
	}
	if err != nil {
		delete(h.keys, arn)
		return fmt.Errorf("keep the HMAC key's material: %w", err)
	}
	return nil
}

// loadState reads the JSON state a front in front of kumo keeps in file
// (what names it in errors) into v; a missing file leaves v as it is.
func loadState(file, what string, v any) error {
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s %s: %w (remove the data dir to start afresh)", what, file, err)
	}
	return nil
}

// writeFileAtomic replaces path with b: a crash leaves the old file or the
// new one, never a part.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (h *hmacKMS) material(arn string) (hmacKey, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k, ok := h.keys[arn]
	return k, ok
}

func (h *hmacKMS) describeKey(r *http.Request, body []byte) (any, error) {
	var in struct {
		KeyID string `json:"KeyId"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, validation("the request body is not a DescribeKey request: %v", err)
	}
	_, out, err := h.resolve(r, in.KeyID)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// resolve describes the key id names (a key id, key ARN, alias name or
// alias ARN, as KMS takes them; kumo takes no alias ARN) through kumo.
func (h *hmacKMS) resolve(r *http.Request, id string) (keyMeta, map[string]json.RawMessage, error) {
	if id == "" {
		return keyMeta{}, nil, validation("KeyId is required")
	}
	lookup, aliasARN := id, ""
	if rest, ok := strings.CutPrefix(id, "arn:"); ok {
		if i := strings.Index(rest, ":alias/"); i >= 0 {
			lookup, aliasARN = rest[i+1:], "arn:"+rest[:i+1]
		}
	}
	body, _ := json.Marshal(map[string]string{"KeyId": lookup})
	out, err := h.kumo(r, "DescribeKey", body)
	if err != nil {
		return keyMeta{}, nil, err
	}
	out, km, err := withMacAlgorithms(out)
	if err != nil {
		return keyMeta{}, nil, err
	}
	// An alias ARN names its region and account: the key must be there.
	if aliasARN != "" && !strings.HasPrefix(km.Arn, aliasARN) {
		return keyMeta{}, nil, &kmsError{http.StatusNotFound, "NotFoundException", "Alias " + id + " is not found."}
	}
	return km, out, nil
}

// macRequest is GenerateMac's and VerifyMac's request.
type macRequest struct {
	KeyID        string   `json:"KeyId"`
	Message      []byte   `json:"Message"`
	Mac          []byte   `json:"Mac"`
	MacAlgorithm string   `json:"MacAlgorithm"`
	GrantTokens  []string `json:"GrantTokens"`
	DryRun       bool     `json:"DryRun"`
}

// mac checks a GenerateMac or VerifyMac request as KMS does and returns
// the key's ARN and the message's MAC under it.
func (h *hmacKMS) mac(r *http.Request, op string, body []byte) (in macRequest, arn string, mac []byte, err error) {
	if err := json.Unmarshal(body, &in); err != nil {
		return in, "", nil, validation("the request body is not a %s request: %v", op, err)
	}
	switch {
	case in.KeyID == "":
		return in, "", nil, validation("KeyId is required")
	case len(in.Message) < 1 || len(in.Message) > maxMacMessage:
		return in, "", nil, validation("Message is %d bytes: it must be 1 to %d", len(in.Message), maxMacMessage)
	case in.MacAlgorithm == "":
		return in, "", nil, validation("MacAlgorithm is required")
	case op == "VerifyMac" && (len(in.Mac) < 1 || len(in.Mac) > maxMac):
		return in, "", nil, validation("Mac is %d bytes: it must be 1 to %d", len(in.Mac), maxMac)
	case len(in.GrantTokens) > 10:
		return in, "", nil, validation("GrantTokens has %d members: at most 10", len(in.GrantTokens))
	}
	known := false
	for _, s := range hmacSpecs {
		known = known || s.alg == in.MacAlgorithm
	}
	if !known {
		return in, "", nil, validation("MacAlgorithm %q is not one of HMAC_SHA_224, HMAC_SHA_256, HMAC_SHA_384, HMAC_SHA_512", in.MacAlgorithm)
	}
	km, _, err := h.resolve(r, in.KeyID)
	if err != nil {
		return in, "", nil, err
	}
	switch km.KeyState {
	case "Enabled":
	case "Disabled":
		return in, "", nil, &kmsError{http.StatusConflict, "DisabledException", km.Arn + " is disabled."}
	default:
		return in, "", nil, &kmsError{http.StatusConflict, "KMSInvalidStateException", km.Arn + " is " + km.KeyState + "."}
	}
	s, isHMAC := hmacSpecs[km.KeySpec]
	switch {
	case !isHMAC || km.KeyUsage != macUsage:
		return in, "", nil, &kmsError{http.StatusBadRequest, "InvalidKeyUsageException", fmt.Sprintf("%s key usage is %s, spec %s: %s needs an HMAC key (GENERATE_VERIFY_MAC)", km.Arn, km.KeyUsage, km.KeySpec, op)}
	case s.alg != in.MacAlgorithm:
		return in, "", nil, &kmsError{http.StatusBadRequest, "InvalidKeyUsageException", fmt.Sprintf("%s (%s) does not support MacAlgorithm %s; it supports %s", km.Arn, km.KeySpec, in.MacAlgorithm, s.alg)}
	}
	k, ok := h.material(km.Arn)
	if !ok || k.Spec != km.KeySpec {
		return in, "", nil, &kmsError{http.StatusInternalServerError, "KMSInternalException", "the dev kit has no key material for " + km.Arn + " (a key created before the dev kit kept HMAC keys: remove the data dir to start afresh)"}
	}
	if in.DryRun {
		return in, "", nil, &kmsError{http.StatusPreconditionFailed, "DryRunOperationException", "The request would have succeeded, but the DryRun flag is set."}
	}
	m := hmac.New(s.hash, k.Material)
	m.Write(in.Message)
	return in, km.Arn, m.Sum(nil), nil
}

func (h *hmacKMS) generateMac(r *http.Request, body []byte) (any, error) {
	in, arn, mac, err := h.mac(r, "GenerateMac", body)
	if err != nil {
		return nil, err
	}
	return map[string]any{"KeyId": arn, "Mac": mac, "MacAlgorithm": in.MacAlgorithm}, nil
}

func (h *hmacKMS) verifyMac(r *http.Request, body []byte) (any, error) {
	in, arn, mac, err := h.mac(r, "VerifyMac", body)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(mac, in.Mac) {
		return nil, &kmsError{http.StatusBadRequest, "KMSInvalidMacException", "The MAC is not valid for the message and key."}
	}
	return map[string]any{"KeyId": arn, "MacValid": true, "MacAlgorithm": in.MacAlgorithm}, nil
}
