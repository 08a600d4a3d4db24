// Package browser opens pages in Debian's headless Chromium for tests: the
// DOM as the page's scripts left it, and screenshots. A test whose machine
// has no chromium skips, or fails under CI=true (see package testenv).
package browser

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/planrun/planrun/internal/testenv"
)

// Timeout bounds one Chromium run: starting it on a busy machine takes
// seconds, and a page that never settles must not hang the test.
const Timeout = 2 * time.Minute

// Options say how a page is opened.
type Options struct {
	// Budget is the virtual time the page's scripts get (timers run
	// without waiting) before the DOM is taken; 5 s when 0.
	Budget time.Duration
	// Width and Height are the window's size; 1280x2000 when 0.
	Width, Height int
}

// Chromium returns the path of chromium, skipping the test (failing it
// under CI=true) when it is not installed.
func Chromium(t testing.TB) string {
	t.Helper()
	return testenv.Program(t, "chromium", "chromium")
}

// DumpDOM loads url (file:// or http://) and returns the page's DOM
// serialized once its scripts ran.
func DumpDOM(t testing.TB, url string, opts Options) string {
	t.Helper()
	out := run(t, opts, "--dump-dom", url)
	if len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("chromium printed no DOM for %s", url)
	}
	return string(out)
}

// Screenshot loads url and saves what the window shows as a PNG at path.
func Screenshot(t testing.TB, url, path string, opts Options) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	run(t, opts, "--hide-scrollbars", "--screenshot="+abs, url)
	if st, err := os.Stat(abs); err != nil || st.Size() == 0 {
		t.Fatalf("chromium wrote no screenshot of %s at %s (%v)", url, abs, err)
	}
}

// run starts Chromium headless with a profile of its own (so that tests
// can run side by side) and returns its standard output. Chromium starts
// helper processes: they run in a process group of their own, killed when
// it ends or times out.
func run(t testing.TB, opts Options, args ...string) []byte {
	t.Helper()
	bin := Chromium(t)
	if opts.Budget == 0 {
		opts.Budget = 5 * time.Second
	}
	if opts.Width == 0 {
		opts.Width, opts.Height = 1280, 2000
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--mute-audio",
		"--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=" + strconv.FormatInt(opts.Budget.Milliseconds(), 10),
		fmt.Sprintf("--window-size=%d,%d", opts.Width, opts.Height)}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind, if any
	}
	if ctx.Err() != nil {
		t.Fatalf("chromium did not finish within %s: %v\n%s", Timeout, args, tail(stderr.Bytes()))
	}
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, tail(stderr.Bytes()))
	}
	return stdout.Bytes()
}

// tail is the end of Chromium's log, where the cause of a failure is.
func tail(b []byte) []byte {
	const n = 4000
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
