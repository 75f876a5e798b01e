package ledger

// SplitEveryVerify makes every Verify of this process read its input as
// streams and check its keys in n partitions (0: as given).
func SplitEveryVerify(n int) { splitForTests = n }

// SplitRuns counts the runs SplitEveryVerify split.
func SplitRuns() int64 { return splitRuns.Load() }

// ProofEveryVerify makes every Verify of this process run again with the
// proofs of earlier runs (againWithProofs).
func ProofEveryVerify() { proofsForTests = true }

// ProofRuns counts ProofEveryVerify's runs, those whose proofs skipped a
// check and those that found something else, and describes the first of
// those.
func ProofRuns() (runs, reused, mismatched int64, first string) {
	proofMismatch.Lock()
	defer proofMismatch.Unlock()
	return proofRuns.Load(), proofReuses.Load(), proofMismatches.Load(), proofMismatch.first
}

// HeaderRuns counts the recounts a partitioned test made again with a
// Verify's segment headers, and those that found something else, and
// describes the first of those.
func HeaderRuns() (runs, mismatched int64, first string) {
	headerMismatch.Lock()
	defer headerMismatch.Unlock()
	return headerRuns.Load(), headerMismatches.Load(), headerMismatch.first
}
