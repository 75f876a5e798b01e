package lambdatest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakRSS is the bootstrap's peak resident set size so far, in bytes: the
// kernel's high-water mark (VmHWM in /proc/<pid>/status, Linux only). It
// is what Lambda reports as "Max Memory Used" for a function whose only
// process is its bootstrap (provided.al2023), less the runtime's own
// share of the sandbox.
func (f *Function) PeakRSS() (int64, error) {
	return peakRSS(f.cmd.Process.Pid)
}

func peakRSS(pid int) (int64, error) {
	file, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, unit, _ := strings.Cut(strings.TrimSpace(rest), " ")
		n, err := strconv.ParseInt(kb, 10, 64)
		if err != nil || unit != "kB" {
			return 0, fmt.Errorf("peak RSS: VmHWM %q", rest)
		}
		return n * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	return 0, errors.New("peak RSS: no VmHWM in /proc status")
}
