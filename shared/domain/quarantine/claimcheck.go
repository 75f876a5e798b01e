package quarantine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Claim checks: a body or an attribute set too large for the item is kept
// in the payload store, and the record holds its reference (ObjectRef).

// PayloadKey names a claim-check object: per record (so the sweeper may
// delete it once archived without touching another record's) and per
// content hash (so a retried write is idempotent). kind is "bodies",
// "attributes" or "corrections".
func PayloadKey(kind string, r *Record, sum string) string {
	return kind + "/" + r.Source + "/" + BodySHA256([]byte(r.DLQID))[:32] + "/" + sum
}

// DecodeBody returns the bytes of r's inline body (empty when the payload
// store holds it), unchecked.
func DecodeBody(r *Record) ([]byte, error) { return decodeBody(r) }

func decodeBody(r *Record) ([]byte, error) {
	if r.BodyEncoding == EncodingBase64 {
		b, err := base64.StdEncoding.DecodeString(r.Body)
		if err != nil {
			return nil, fmt.Errorf("decode body of %s: %w", r.DLQID, err)
		}
		return b, nil
	}
	return []byte(r.Body), nil
}

// LoadBody returns the original body bytes of r, from the item or from the
// payload store, and checks them against r.BodySHA256.
func LoadBody(ctx context.Context, payloads PayloadStore, r *Record) ([]byte, error) {
	var body []byte
	if r.BodyRef != nil {
		if payloads == nil {
			return nil, fmt.Errorf("record %s: body is in the payload store, none configured", r.DLQID)
		}
		b, err := payloads.GetPayload(ctx, *r.BodyRef)
		if err != nil {
			return nil, fmt.Errorf("load body of %s: %w", r.DLQID, err)
		}
		body = b
	} else {
		b, err := decodeBody(r)
		if err != nil {
			return nil, err
		}
		body = b
	}
	if BodySHA256(body) != r.BodySHA256 {
		return nil, fmt.Errorf("record %s: %w", r.DLQID, ErrPayloadMismatch)
	}
	return body, nil
}

// LoadAttributes returns the original message attributes of r, from the item
// or from the payload store.
func LoadAttributes(ctx context.Context, payloads PayloadStore, r *Record) (map[string]Attribute, error) {
	if r.AttributesRef == nil {
		return r.Attributes, nil
	}
	if payloads == nil {
		return nil, fmt.Errorf("record %s: attributes are in the payload store, none configured", r.DLQID)
	}
	raw, err := payloads.GetPayload(ctx, *r.AttributesRef)
	if err != nil {
		return nil, fmt.Errorf("load attributes of %s: %w", r.DLQID, err)
	}
	var attrs map[string]Attribute
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return nil, fmt.Errorf("decode attributes of %s: %w", r.DLQID, err)
	}
	return attrs, nil
}
