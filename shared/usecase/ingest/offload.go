package ingest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// moveAttributes moves r's attributes to the payload store when they are
// larger than inlineMax in JSON (0: whatever their size).
func (qr *Quarantiner) moveAttributes(ctx context.Context, r *quarantine.Record, inlineMax int) error {
	if r.AttributesRef != nil || r.Attributes == nil {
		return nil
	}
	raw, err := json.Marshal(r.Attributes)
	if err != nil {
		return fmt.Errorf("marshal attributes: %w", err)
	}
	if len(raw) <= inlineMax {
		return nil
	}
	return qr.offloadAttributes(ctx, r, raw)
}

// inline reports whether offload would leave r as it is: its body and
// attributes stay in the item.
func (qr *Quarantiner) inline(r *quarantine.Record) bool {
	if r.BodyRef == nil && len(r.Body) > qr.cfg.BodyInlineMax {
		return false
	}
	if r.AttributesRef == nil && r.Attributes != nil {
		raw, err := json.Marshal(r.Attributes)
		if err != nil || len(raw) > qr.cfg.AttributesInlineMax {
			return false
		}
	}
	return len(r.Body)+attributesSize(r.Attributes)+smallFieldsBound+quarantine.GrowthReserve(qr.cfg.MaxAttempts) <= quarantine.ItemBudget
}

// offload moves the body and attributes to the payload store when they would
// make the item too large. It is idempotent: object keys are content hashes.
func (qr *Quarantiner) offload(ctx context.Context, r *quarantine.Record) error {
	if r.BodyRef == nil && len(r.Body) > qr.cfg.BodyInlineMax {
		if err := qr.offloadBody(ctx, r); err != nil {
			return err
		}
	}
	if err := qr.moveAttributes(ctx, r, qr.cfg.AttributesInlineMax); err != nil {
		return err
	}
	reserve := quarantine.GrowthReserve(qr.cfg.MaxAttempts)
	// Cheap bound first: everything but body and attributes is small.
	if len(r.Body)+attributesSize(r.Attributes)+smallFieldsBound+reserve <= quarantine.ItemBudget {
		return nil
	}
	size, err := quarantine.RecordSize(r)
	if err != nil {
		return err
	}
	if size+reserve <= quarantine.ItemBudget {
		return nil
	}
	if r.BodyRef == nil && r.Body != "" {
		if err := qr.offloadBody(ctx, r); err != nil {
			return err
		}
	}
	if err := qr.moveAttributes(ctx, r, 0); err != nil {
		return err
	}
	if size, err = quarantine.RecordSize(r); err != nil {
		return err
	}
	if size+reserve > quarantine.ItemBudget {
		// Unreachable while every stored text is bounded (actors.go): what
		// stays in the item once body and attributes are in the payload
		// store is far below the budget.
		return fmt.Errorf("record %s is %d bytes after offloading: %w", r.DLQID, size, quarantine.ErrItemTooLarge)
	}
	return nil
}

func (qr *Quarantiner) offloadBody(ctx context.Context, r *quarantine.Record) error {
	if qr.payloads == nil {
		return fmt.Errorf("body of %d bytes needs a payload bucket: %w", r.BodySize, quarantine.ErrItemTooLarge)
	}
	raw, err := quarantine.DecodeBody(r)
	if err != nil {
		return err
	}
	ref, err := qr.payloads.PutPayload(ctx, quarantine.PayloadKey("bodies", r, r.BodySHA256), raw)
	if err != nil {
		return fmt.Errorf("store body: %w", err)
	}
	r.BodyRef, r.Body = &ref, ""
	return nil
}

func (qr *Quarantiner) offloadAttributes(ctx context.Context, r *quarantine.Record, raw []byte) error {
	if qr.payloads == nil {
		return fmt.Errorf("attributes of %d bytes need a payload bucket: %w", len(raw), quarantine.ErrItemTooLarge)
	}
	ref, err := qr.payloads.PutPayload(ctx, quarantine.PayloadKey("attributes", r, quarantine.BodySHA256(raw)), raw)
	if err != nil {
		return fmt.Errorf("store attributes: %w", err)
	}
	r.AttributesRef, r.Attributes = &ref, nil
	return nil
}

// smallFieldsBound bounds the JSON of every record field but the body,
// the attributes and the attempts (ids, hashes, reasons, times).
const smallFieldsBound = 16 << 10

// attributesSize bounds the JSON size of attrs (base64 grows binary by 4/3,
// escaping at most 6x a control character: count 6 per byte to be safe).
func attributesSize(attrs map[string]quarantine.Attribute) int {
	n := 0
	for k, a := range attrs {
		n += 64 + 6*(len(k)+len(a.DataType)+len(a.StringValue)) + 2*len(a.BinaryValue)
	}
	return n
}
