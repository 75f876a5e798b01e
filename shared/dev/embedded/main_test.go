package embedded

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type fakeM struct {
	code int
	ran  bool
	saw  *Stack
	into **Stack
}

func (f *fakeM) Run() int { f.ran, f.saw = true, *f.into; return f.code }

func TestMainRunsTheTestsAgainstAStartedStack(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "not-a-dummy")
	var stack *Stack
	m := &fakeM{code: 3, into: &stack}
	var order []int
	code := run(m, Options{NoS3: true, Dir: t.TempDir()}, &stack,
		func(c int) int { order = append(order, c); return c + 1 },
		func(c int) int { order = append(order, c); return c * 10 })
	if !m.ran || m.saw == nil || m.saw != stack || stack.Endpoint == "" {
		t.Fatalf("ran %v with stack %v (stored %v)", m.ran, m.saw, stack)
	}
	if code != 40 || !slices.Equal(order, []int{3, 4}) {
		t.Fatalf("code %d after %v, want 40 after [3 4]", code, order)
	}
	for k, want := range map[string]string{"AWS_REGION": Region, "AWS_ACCESS_KEY_ID": AccessKey, "AWS_SECRET_ACCESS_KEY": SecretKey} {
		if got := os.Getenv(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestMainExitsOneWhenTheStackDoesNotStart(t *testing.T) {
	t.Setenv("AWS_REGION", Region)
	var stack *Stack
	m := &fakeM{into: &stack}
	called := false
	code := run(m, Options{NoS3: true, Template: filepath.Join(t.TempDir(), "missing.yaml")}, &stack,
		func(c int) int { called = true; return c })
	if code != 1 || m.ran || called || stack != nil {
		t.Fatalf("code %d, ran %v, after called %v, stack %v", code, m.ran, called, stack)
	}
}

func TestForTestStartsAStackInTheTestsDir(t *testing.T) {
	t.Parallel()
	var st *Stack
	t.Run("inner", func(t *testing.T) {
		st = ForTest(t, Options{NoS3: true})
		if st.Endpoint == "" || st.Names["QuarantineTable"] == "" || !strings.HasPrefix(st.ConfigFile, os.TempDir()) || !strings.Contains(st.ConfigFile, "TestForTest") {
			t.Fatalf("stack %+v", st)
		}
	})
	if st == nil {
		t.Fatal("no stack")
	}
}
