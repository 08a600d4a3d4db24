package steps

import (
	"strconv"
	"syscall"
)

// signals are the signals planrun names (and kill steps may send).
var signals = []struct {
	name string
	sig  syscall.Signal
}{{"KILL", syscall.SIGKILL}, {"TERM", syscall.SIGTERM}, {"STOP", syscall.SIGSTOP}, {"CONT", syscall.SIGCONT}, {"INT", syscall.SIGINT}, {"HUP", syscall.SIGHUP}}

// signalName names a signal as kill steps and results do: KILL, SEGV, 11.
func signalName(sig syscall.Signal) string {
	for _, k := range signals {
		if k.sig == sig {
			return k.name
		}
	}
	switch sig {
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGABRT:
		return "ABRT"
	case syscall.SIGSEGV:
		return "SEGV"
	case syscall.SIGPIPE:
		return "PIPE"
	}
	return strconv.Itoa(int(sig))
}
