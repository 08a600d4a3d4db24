package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The helper run in a child test process: with the broker's variable unset
// it skips, except under CI=true, where it fails.
func TestBrokerMissing(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") != "" {
		Broker(t, "PLANRUN_TEST_NOT_SET_ANYWHERE")
		Program(t, "planrun-no-such-program", "no-such-package")
		return
	}
	for _, ci := range []string{"true", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBrokerMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "CI="+ci, "PLANRUN_TEST_NOT_SET_ANYWHERE=")
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "true" && (err == nil || !strings.Contains(string(out), "PLANRUN_TEST_NOT_SET_ANYWHERE is not set: CI must provide it")):
			t.Errorf("CI=true: a missing broker did not fail the test (%v):\n%s", err, out)
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP")):
			t.Errorf("outside CI: a missing broker did not skip the test (%v):\n%s", err, out)
		}
	}
}
