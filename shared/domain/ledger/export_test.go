package ledger

// SplitEveryVerify makes every Verify of this process read its input as
// streams and check its keys in n partitions (0: as given).
func SplitEveryVerify(n int) { splitForTests = n }

// SplitRuns counts the runs SplitEveryVerify split.
func SplitRuns() int64 { return splitRuns.Load() }
