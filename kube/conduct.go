package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Conduct is what the conductor pod runs: it waits until every worker's
// control port answers, runs `planrun run --workers ...` (this same binary)
// with the remaining arguments, and then writes the report folder to
// stdout as a marked block (WriteArchive), so that whoever reads the log
// gets the report. It returns the conductor's exit code.
func Conduct(ctx context.Context, workers []string, outDir string, wait time.Duration, runArgs []string, stdout, stderr io.Writer) int {
	if err := waitReachable(ctx, workers, wait, stderr); err != nil {
		fmt.Fprintf(stderr, "planrun kube conduct: %v\n", err)
		_ = WriteArchive(stdout, outDir, exitRunFailure)
		return exitRunFailure
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "planrun kube conduct: %v\n", err)
		return exitRunFailure
	}
	args := []string{"run", "--workers", strings.Join(workers, ","), "--out", outDir}
	if tok := os.Getenv("PLANRUN_TOKEN"); tok != "" {
		args = append(args, "--token", tok)
	}
	cmd := exec.CommandContext(ctx, self, append(args, runArgs...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A stop from Kubernetes (SIGTERM) reaches the conductor as SIGTERM, so
	// it stops the workloads and writes what it measured.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	code := exitOK
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() >= 0 {
			code = ee.ExitCode()
		} else {
			fmt.Fprintf(stderr, "planrun kube conduct: %v\n", err)
			code = exitRunFailure
		}
	}
	if err := WriteArchive(stdout, outDir, code); err != nil {
		fmt.Fprintf(stderr, "planrun kube conduct: %v\n", err)
		return exitRunFailure
	}
	return code
}

// waitReachable dials every address until it answers or wait runs out.
// The workers' DNS names exist once their pods are ready.
func waitReachable(ctx context.Context, addrs []string, wait time.Duration, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	fmt.Fprintf(log, "conductor: waiting for %d workers\n", len(addrs))
	var d net.Dialer
	for _, a := range addrs {
		for {
			actx, acancel := context.WithTimeout(ctx, 3*time.Second)
			c, err := d.DialContext(actx, "tcp", a)
			acancel()
			if err == nil {
				c.Close()
				break
			}
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("worker %s not reachable within %s: %v", a, wait, err)
			case <-t.C:
			}
		}
	}
	fmt.Fprintf(log, "conductor: all %d workers reachable\n", len(addrs))
	return nil
}
