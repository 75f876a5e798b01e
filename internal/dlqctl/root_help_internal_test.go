package dlqctl

import (
	"runtime/debug"
	"testing"
)

// The version says the module version and the VCS revision, and says
// "(devel)" and "unknown" cleanly for what the build did not record.
func TestVersionOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "(devel), revision unknown"},
		{"a devel build without VCS", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel), revision unknown"},
		{"an empty version", &debug.BuildInfo{}, true, "(devel), revision unknown"},
		{"a release", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "false"}}}, true, "v1.4.0, revision 0123abcd"},
		{"a modified tree", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}, true, "(devel), revision 0123abcd (modified)"},
	} {
		if got := versionOf(c.info, c.ok); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
