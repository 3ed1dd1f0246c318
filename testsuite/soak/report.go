package soak

import (
	"fmt"
	"io"
	"sync"
)

// report is the soak's output: the progress lines it writes and the
// failures it collects, which every loop of the run adds to.
type report struct {
	out io.Writer

	mu       sync.Mutex
	failures []string
}

// fail records a failure of the soak's invariants and prints it.
func (p *report) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	p.failures = append(p.failures, msg)
	p.mu.Unlock()
	fmt.Fprintf(p.out, "soak: FAIL %s\n", msg)
}

// progress prints a progress line.
func (p *report) progress(format string, args ...any) {
	fmt.Fprintf(p.out, "soak: "+format+"\n", args...)
}

// snapshot returns the failures recorded so far.
func (p *report) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failures...)
}
