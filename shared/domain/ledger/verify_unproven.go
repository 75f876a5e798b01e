package ledger

import "fmt"

// KindHeadUnproven: a signed digest records a shard head the table held
// that its run could not prove against the bucket (Digest.Unproven: the
// segment missing or not hashing to it, a chain that does not reach the
// digest before it in as many segments as it counts, a count or last_seq
// gone backwards): the table's head item was rewritten, or the bucket
// lost a segment. The digest kept the previous head, so the chain itself
// may verify clean; the record of the failure is signed.
const KindHeadUnproven Kind = "head-unproven"

// unproven names each signed digest's unproven heads (subject the digest
// key), except those the run did not reach in time (ReasonNotReached): of
// the newest signed digest, those are notes (Result.HeadsNotReached; the
// next run continues), of an older one nothing (a later run reached
// them and signed them, or recorded why not).
func (v *verifier) unproven(signed []*parsedDigest) {
	for i, p := range signed {
		for _, u := range p.d.Unproven {
			head := "no head"
			if u.SegmentKey != "" {
				head = fmt.Sprintf("head %s (sha256 %s, %d segments, last_seq %s)", u.SegmentKey, u.SegmentSHA256, u.Segments, u.LastSeq)
			}
			if u.Reason == ReasonNotReached {
				if i == len(signed)-1 {
					v.res.HeadsNotReached = append(v.res.HeadsNotReached, Note{Subject: p.key,
						Detail: "shard " + u.Shard + ": the table's " + head + " was not proven: " + u.Reason + " (the next digest run continues)"})
				}
				continue
			}
			v.fail(KindHeadUnproven, p.key, "shard %s: the table held %s, which the digest run could not prove against the bucket: %s", u.Shard, head, u.Reason)
		}
	}
}
