package harness

import (
	"runtime"
	"syscall"
	"time"
)

// pacer sleeps until a moment with the precision of the kernel's
// high-resolution timers, as bench/loadgen's does: Go's timers wake through
// the network poller in whole milliseconds (golang/go#44343), too coarse
// for an open-loop schedule, while nanosleep(2) on a locked thread with a
// timer slack of 1 µs (prctl PR_SET_TIMERSLACK) wakes within tens of
// microseconds. close unlocks the thread and restores its slack.
type pacer struct{}

const prSetTimerslack = 29 // <linux/prctl.h>

func newPacer() pacer {
	runtime.LockOSThread()
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1000, 0) // ns; best effort
	return pacer{}
}

func (pacer) sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		if syscall.Nanosleep(&ts, nil) == nil {
			return
		}
		// EINTR: the runtime's preemption signal; sleep on.
	}
}

func (pacer) close() {
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 0, 0) // 0: the thread's default again
	runtime.UnlockOSThread()
}
