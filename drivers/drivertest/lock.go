package drivertest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// LockBroker holds, until the test ends, an exclusive lock beside a broker
// process's pid file, so that tests of several packages (which go test
// runs at once) never stop and start the same broker together. The
// broker-restart check takes it for a ProcessBroker; any other test that
// kills that broker must take it too.
func LockBroker(t testing.TB, pidfile string) {
	t.Helper()
	path := filepath.Join(filepath.Dir(pidfile), "planrun-restart.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("lock %s: %v", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
}
