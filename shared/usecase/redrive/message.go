package redrive

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

func (r *run) entry(id string, c *claimed) sqstypes.SendMessageBatchRequestEntry {
	e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(c.body)), MessageAttributes: c.attrs}
	if r.fifo() {
		e.MessageGroupId = aws.String(group(c.rec))
		e.MessageDeduplicationId = aws.String(DeduplicationID(c.rec.DLQID, c.rec.RedriveCount))
	}
	return e
}

// DeduplicationID is the FIFO deduplication id of one replay round: the
// same for every try of the round. SQS drops a copy with an id it saw
// within its 5-minute deduplication interval, so the tries of one run
// (seconds apart) never enqueue a round twice. A takeover after an expired
// lease (16 minutes by default) is past that interval: SQS accepts its
// copy, and the record's history says that a duplicate send is possible.
func DeduplicationID(dlqID string, round int) string {
	sum := sha256.Sum256([]byte(dlqID + "#" + strconv.Itoa(round)))
	return hex.EncodeToString(sum[:])
}

// messageAttributes returns the original attributes plus the record id and
// redrive count, within SQS's limit of 10: with 9 originals only the record
// id is added, with 10 nothing is (the original attributes always win).
func messageAttributes(orig map[string]quarantine.Attribute, rec *quarantine.Record) map[string]sqstypes.MessageAttributeValue {
	out := make(map[string]sqstypes.MessageAttributeValue, len(orig)+2)
	for k, a := range orig {
		if k == quarantine.AttrRecordID || k == quarantine.AttrRedriveCount || k == quarantine.AttrCorrected {
			continue
		}
		v := sqstypes.MessageAttributeValue{DataType: aws.String(a.DataType)}
		if strings.HasPrefix(a.DataType, "Binary") {
			v.BinaryValue = a.BinaryValue
		} else {
			v.StringValue = aws.String(a.StringValue)
		}
		out[k] = v
	}
	if c := rec.Latest(); c != nil {
		// A corrected replay says so, and keeps the event identity the
		// correction promised (room for both was checked when correcting).
		out[quarantine.AttrCorrected] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(c.CorrectionNumber())}
		if c.KeyAttribute != "" {
			out[c.KeyAttribute] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(rec.IdempotencyKey)}
		}
	}
	if len(out) < MaxAttributes {
		out[quarantine.AttrRecordID] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(rec.DLQID)}
	}
	if len(out) < MaxAttributes {
		out[quarantine.AttrRedriveCount] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(rec.RedriveCount))}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// messageSize is what SQS counts against its size limit: body plus each
// attribute's name, type and value.
func messageSize(body []byte, attrs map[string]sqstypes.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}
