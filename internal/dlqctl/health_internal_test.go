package dlqctl

import "testing"

// Only a loopback endpoint is taken for an emulator whose alarms are never
// evaluated: 127.0.0.0/8, ::1, localhost.
func TestLoopbackEndpoint(t *testing.T) {
	t.Parallel()
	for endpoint, want := range map[string]bool{
		"http://127.0.0.1:4566":             true,
		"http://127.8.9.10":                 true,
		"http://[::1]:4566":                 true,
		"http://localhost:4566":             true,
		"http://LocalHost":                  true,
		"":                                  false,
		"http://10.0.0.5:4566":              false,
		"http://128.0.0.1:4566":             false,
		"http://[::2]:4566":                 false,
		"http://localhost.example.com:4566": false,
		"https://monitoring.us-east-1.amazonaws.com":             false,
		"https://vpce-1.monitoring.us-east-1.vpce.amazonaws.com": false,
		"::not a url": false,
	} {
		if got := loopbackEndpoint(endpoint); got != want {
			t.Errorf("loopbackEndpoint(%q) = %v, want %v", endpoint, got, want)
		}
	}
}
