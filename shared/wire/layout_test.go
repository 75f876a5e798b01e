package wire_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/dlqquarantine/dlqq"

// goList runs go list in the module with args and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// No function links a package of the development folder or an emulator.
func TestFunctionsLinkNoDevelopmentKit(t *testing.T) {
	t.Parallel()
	for _, p := range goList(t, "-deps", "./functions/...") {
		if strings.HasPrefix(p, module+"/shared/dev/") || strings.Contains(p, "sivchari/kumo") || strings.Contains(p, "versity/versitygw") {
			t.Errorf("a function links %s", p)
		}
	}
}

// The use cases depend on ports only: wiring them to the adapters is this
// package's job.
func TestUseCasesImportNoAdapter(t *testing.T) {
	t.Parallel()
	for _, l := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./shared/usecase/...") {
		f := strings.Fields(l)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"/shared/adapter/") {
				t.Errorf("%s imports %s", f[0], imp)
			}
		}
	}
}
