package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// elapsedDelay is how long an operation runs before its elapsed-time line
// appears; quick operations show nothing.
const elapsedDelay = time.Second

// elapsedLine shows "<label>: <elapsed>" on a terminal while a long
// operation whose progress cannot be counted (opening and repairing a big
// log, a resume) runs.
type elapsedLine struct {
	stop chan struct{}
	done sync.WaitGroup
}

// startElapsed starts redrawing the line on w every tick once delay has
// passed; when tty is false it draws nothing. Stop it with stop.
func startElapsed(w io.Writer, tty bool, label string, delay, tick time.Duration) *elapsedLine {
	e := &elapsedLine{stop: make(chan struct{})}
	if !tty {
		return e
	}
	start := time.Now()
	e.done.Add(1)
	go func() {
		defer e.done.Done()
		timer := time.NewTimer(delay)
		defer timer.Stop()
		drawn := false
		for {
			select {
			case <-e.stop:
				if drawn {
					fmt.Fprintf(w, "\r%s: done in %s\n", label, time.Since(start).Round(100*time.Millisecond))
				}
				return
			case <-timer.C:
				fmt.Fprintf(w, "\r%s: %s", label, time.Since(start).Round(time.Second))
				drawn = true
				timer.Reset(tick)
			}
		}
	}()
	return e
}

// stopElapsed ends the line and waits for its last redraw.
func (e *elapsedLine) stopElapsed() {
	close(e.stop)
	e.done.Wait()
}
