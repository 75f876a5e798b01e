package dynamostore

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Marshal encodes a record as a DynamoDB item; the JSON field names are the
// attribute names, plus the source index's partition key (IndexKeyAttr),
// which the record's source, status and key derive.
func Marshal(r *quarantine.Record) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMapWithOptions(r, func(o *attributevalue.EncoderOptions) {
		o.TagKey = "json"
		o.UseEncodingMarshalers = true // quarantine.Time: fixed-width text that sorts
	})
	if err != nil {
		return nil, fmt.Errorf("marshal record %s: %w", r.DLQID, err)
	}
	item[IndexKeyAttr] = &types.AttributeValueMemberS{Value: recordIndexKey(r.Source, r.Status, r.DLQID)}
	return item, nil
}

// Unmarshal decodes a DynamoDB item into a record.
func Unmarshal(item map[string]types.AttributeValue) (*quarantine.Record, error) {
	var r quarantine.Record
	if err := attributevalue.UnmarshalMapWithOptions(item, &r, func(o *attributevalue.DecoderOptions) {
		o.TagKey = "json"
		o.UseEncodingUnmarshalers = true
	}); err != nil {
		return nil, fmt.Errorf("unmarshal record: %w", err)
	}
	return &r, nil
}

// decode is Unmarshal for the store's reads: an item that does not decode
// (changed outside the system) comes back as a stand-in that fails
// verification, so that it is set aside like any tampered record instead
// of failing every read, every run and every arrival for its key.
func decode(item map[string]types.AttributeValue) *quarantine.Record {
	r, err := Unmarshal(item)
	if err == nil {
		return r
	}
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	version := int64(-1)
	if v, ok := item[VersionAttr].(*types.AttributeValueMemberN); ok {
		if n, perr := strconv.ParseInt(v.Value, 10, 64); perr == nil {
			version = n
		}
	}
	r = quarantine.Undecodable(str(KeyAttr), str(sourceAttr), quarantine.Status(str(statusAttr)), str(sealAttr), version, "unmarshal: "+quarantine.ErrorKind(err))
	// What else still reads: its FIFO group (so the group waits for it)
	// and its age (so metrics do not take it for a record of year 1).
	r.MessageGroupID, r.IdempotencyKey = str(groupAttr), str(idempotencyKeyAttr)
	for name, t := range map[string]*quarantine.Time{firstSeenAttr: &r.FirstSeen, statusSinceAttr: &r.StatusSince, lastSeenAttr: &r.LastSeen} {
		_ = t.UnmarshalText([]byte(str(name)))
	}
	return r
}

// ItemSize computes an item's size by DynamoDB's rules: attribute names plus
// values, with 3 bytes of overhead per map or list and 1 per element.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch t := v.(type) {
	case *types.AttributeValueMemberS:
		return len(t.Value)
	case *types.AttributeValueMemberN:
		return (len(t.Value)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(t.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range t.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range t.Value {
			n += valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		return totalLen(t.Value)
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range t.Value {
			n += (len(e)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		return totalLen(t.Value)
	}
	return 0
}

// totalLen is the sum of the lengths of a string or binary set's members.
func totalLen[E ~string | ~[]byte](set []E) int {
	n := 0
	for _, e := range set {
		n += len(e)
	}
	return n
}
