package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// inputSize is the size of a regular file behind r, 0 when unknown.
func inputSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return 0
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// Progress display settings.
const (
	progressMinBytes = 1 << 20                // smaller inputs show no progress
	progressInterval = 100 * time.Millisecond // between two redraws
)

// progress redraws one status line on a terminal.
type progress struct {
	w        io.Writer
	label    string
	total    int64 // 0 when unknown
	now      func() time.Time
	interval time.Duration
	last     time.Time
	done     int64
	width    int // of the line drawn, to blank it when it shrinks
}

// newProgress returns a progress line for an input of total bytes (0 when
// unknown).
func newProgress(w io.Writer, label string, total int64) *progress {
	return &progress{w: w, label: label, total: total, now: time.Now, interval: progressInterval}
}

// update records done bytes and redraws when the input is large and the
// last redraw is old enough.
func (p *progress) update(done int64) {
	p.done = done
	if done < progressMinBytes && p.total < progressMinBytes {
		return
	}
	if t := p.now(); p.width == 0 || t.Sub(p.last) >= p.interval {
		p.last = t
		p.draw()
	}
}

// finish draws the final state and ends the line, if anything was drawn.
func (p *progress) finish() {
	if p.width == 0 {
		return
	}
	p.draw()
	fmt.Fprintln(p.w)
}

func (p *progress) draw() {
	line := p.label + ": " + humanBytes(p.done)
	if p.total > 0 {
		line += fmt.Sprintf(" of %s (%d%%)", humanBytes(p.total), p.done*100/p.total)
	}
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.width = len(line)
}

// humanBytes renders a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
