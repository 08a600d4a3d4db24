// Package testenv gives tests what the machine must provide: the brokers
// .ci/services.sh starts and programs Debian installs. Outside CI a test
// whose broker or program is missing skips; under CI=true it fails, so that
// a CI run cannot pass with the real-broker tests left out.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// CI reports whether the tests run in CI (CI=true), where nothing they need
// may be missing.
func CI() bool { return os.Getenv("CI") == "true" }

// Broker returns the value of env, which .ci/services.sh sets to the
// address (or pid file, or command) of a broker it started. When env is
// unset the test skips, or fails under CI.
func Broker(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		missing(t, env+" is not set", `eval "$(bash .ci/services.sh)" starts the brokers and sets it`)
	}
	return v
}

// Program returns the path of an installed program. When it is not on
// PATH the test skips, or fails under CI.
func Program(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, name+" is not installed", "apt-get install "+pkg+" (bash .ci/services.sh installs it)")
	}
	return p
}

func missing(t testing.TB, what, fix string) {
	t.Helper()
	if CI() {
		t.Fatalf("%s: CI must provide it (%s)", what, fix)
	}
	t.Skipf("%s (%s)", what, fix)
}

// Root makes sure the test runs as root, which network namespaces and
// packet captures need. Otherwise the test skips, or fails under CI.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "the test needs root", "run it as root, as CI does")
	}
}
