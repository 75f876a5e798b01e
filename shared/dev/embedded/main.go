package embedded

import (
	"context"
	"fmt"
	"os"
)

// Runner is what Main runs: a *testing.M.
type Runner interface{ Run() int }

// Main is the whole of a TestMain whose package tests against one embedded
// stack. It sets the stack's dummy credentials and region in the
// environment (so that no test can reach a real account), starts the stack
// with o (or, as Start does, uses AWS_ENDPOINT_URL), stores it in *stack,
// runs the tests, closes the stack and exits with the tests' code. Each of
// after, in order, then sees the exit code and returns the one to use (a
// package's own end-of-run checks). A stack that does not start exits 1
// with the reason on stderr.
//
//	func TestMain(m *testing.M) { embedded.Main(m, embedded.Options{}, &stack) }
func Main(m Runner, o Options, stack **Stack, after ...func(code int) int) {
	os.Exit(run(m, o, stack, after...))
}

func run(m Runner, o Options, stack **Stack, after ...func(code int) int) int {
	os.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	os.Setenv("AWS_REGION", Region)
	st, err := Start(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded stack:", err)
		return 1
	}
	*stack = st
	code := m.Run()
	st.Close()
	for _, f := range after {
		code = f(code)
	}
	return code
}

// TB is the part of testing.TB that ForTest uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
	TempDir() string
}

// ForTest starts a stack of its own for one test or benchmark (when
// o.Dir is empty, in tb's temporary directory), fails tb if it does not
// start, and closes it when tb ends.
func ForTest(tb TB, o Options) *Stack {
	tb.Helper()
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	st, err := Start(context.Background(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	return st
}
