package quarantine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxKeyBytes bounds an idempotency key taken from an attribute or payload.
// Longer values fall through to the next derivation step.
const MaxKeyBytes = 512

// DeriveKey returns the idempotency key of a message and where it came from:
// the producer-supplied attribute named attrName, else the payload field at
// src.IdempotencyPointer, else SHA-256 of the source ARN and the body. It
// never uses the SQS MessageId, which changes on every redrive.
func DeriveKey(src *Source, attrName string, attrs map[string]Attribute, doc any, sourceARN string, body []byte) (string, KeyOrigin) {
	if a, ok := attrs[attrName]; ok && attrName != "" && strings.HasPrefix(a.DataType, "String") {
		if k := strings.TrimSpace(a.StringValue); usableKey(k) {
			return k, KeyFromAttribute
		}
	}
	if src != nil && src.IdempotencyPointer != "" && doc != nil {
		if v, ok := LookupPointer(doc, src.IdempotencyPointer); ok {
			var k string
			switch t := v.(type) {
			case string:
				k = strings.TrimSpace(t)
			case json.Number:
				k = t.String()
			case float64:
				k = strconv.FormatFloat(t, 'g', -1, 64)
			}
			if usableKey(k) {
				return k, KeyFromPointer
			}
		}
	}
	return BodyHashKey(sourceARN, body), KeyFromBodyHash
}

func usableKey(k string) bool {
	return k != "" && len(k) <= MaxKeyBytes && utf8.ValidString(k)
}

// BodyHashKey is the last-resort idempotency key: SHA-256 over the source
// ARN, a NUL separator and the body bytes.
func BodyHashKey(sourceARN string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(sourceARN))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// RecordID builds the partition key: "<source queue name>#<idempotency key>".
func RecordID(source, key string) string {
	return source + "#" + key
}

// LookupPointer evaluates an RFC 6901 JSON pointer against a decoded
// document (maps, slices and scalars as produced by a JSON decoder).
func LookupPointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch node := cur.(type) {
		case map[string]any:
			v, ok := node[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(node) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = node[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// BodySHA256 returns the hex SHA-256 of body.
func BodySHA256(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// LogRef is how logs name a record: a short hash of its dlq_id, because the
// id embeds the idempotency key, which may be a payload value.
func LogRef(dlqID string) string {
	return BodySHA256([]byte(dlqID))[:16]
}
