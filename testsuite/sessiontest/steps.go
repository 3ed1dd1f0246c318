package sessiontest

import (
	"sync"
	"time"

	"github.com/sessionflow/sessionflow/wire"
)

// Steps in sequence.
//
// While an activity runs, the test environment's clock follows the wall
// clock, so a step scheduled at a fixed workflow-clock offset can fire
// before the activities of an earlier step have finished (an Append sent
// before the session is live). The steps registered with At, UpdateAt,
// AtNoWait and UpdateNoWaitAt therefore run in the order they were
// registered (not in the order the environment fires equal offsets), each
// at its offset at the earliest:
//
//   - UpdateAt and At wait until every earlier step has settled (its update
//     completed or was rejected); the sequence then waits for UpdateAt's own
//     update to settle.
//   - UpdateNoWaitAt and AtNoWait wait only for the earlier UpdateAt and At
//     steps, not for earlier updates still in flight, and the sequence does
//     not wait for UpdateNoWaitAt's update (updates meant to be in flight
//     together, a cancellation while an append is pending).
//
// A step that must happen while an earlier update waits for it (an abort
// that fails a pending WaitReady) is sent after that update with the NoWait
// forms, or from an activity listener (OnStarted, OnCompleted) when it must
// find an activity running.

// step is one entry of the sequence; run calls done once the sequence may
// go on.
type step struct {
	// barrier makes the step wait for the updates still in flight.
	barrier bool
	run     func(done func())
}

// sequencer runs the steps in the order they were scheduled; it is used
// only inside the environment's callbacks, except for waitingFor and
// unfinished, which read it after the run or from the deadline's report.
type sequencer struct {
	env *SessionEnv

	scheduled int          // steps registered so far
	next      int          // the step whose turn it is
	due       map[int]step // steps whose offset has passed, by number
	busy      bool         // a step holds the sequence
	inFlight  int          // updateNoWaitAt updates not settled yet

	// waiting names the condition a WaitFor step still waits for.
	mu      sync.Mutex
	waiting string
}

// schedule registers a step due at d and returns; steps run in the order
// they were scheduled, whatever order the environment fires equal offsets
// in.
func (q *sequencer) schedule(d time.Duration, s step) {
	n := q.scheduled
	q.scheduled++
	q.env.RegisterDelayedCallback(func() {
		if q.due == nil {
			q.due = make(map[int]step)
		}
		q.due[n] = s
		q.pump()
	}, d)
}

// pump runs the next step if it is due and its turn has come.
func (q *sequencer) pump() {
	if q.busy {
		return
	}
	s, ok := q.due[q.next]
	if !ok || (s.barrier && q.inFlight > 0) {
		return
	}
	delete(q.due, q.next)
	q.next++
	q.busy = true
	s.run(func() {
		q.busy = false
		q.pump()
	})
}

// hold counts an update in flight; the next barrier step waits for it.
func (q *sequencer) hold() { q.inFlight++ }

// release ends what hold counted and lets the sequence go on.
func (q *sequencer) release() {
	q.inFlight--
	q.pump()
}

// setWaiting records the condition a WaitFor step waits for ("" = none).
func (q *sequencer) setWaiting(what string) {
	q.mu.Lock()
	q.waiting = what
	q.mu.Unlock()
}

// waitingFor returns the condition a WaitFor step waits for, "" if none.
func (q *sequencer) waitingFor() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// unfinished returns the number of scheduled steps that have not run.
func (q *sequencer) unfinished() (left, scheduled int) {
	return q.scheduled - q.next, q.scheduled
}

// At runs fn at d on the workflow clock, once every earlier step settled.
func (h *Harness) At(d time.Duration, fn func()) {
	h.seq.schedule(d, step{barrier: true, run: func(done func()) { fn(); done() }})
}

// AtStarted runs fn at d on the workflow clock once an activity named
// activity has started (holding the sequence until then), after the earlier
// UpdateAt and At steps, whatever UpdateNoWaitAt updates are still in
// flight: an abort or a deactivation that must find the activity pending.
func (h *Harness) AtStarted(d time.Duration, activity string, fn func()) {
	h.seq.schedule(d, step{run: func(done func()) {
		h.whenStarted(activity, func() { fn(); done() })
	}})
}

// WaitFor holds the sequence, from d on, until cond holds (cond is checked
// at the step's turn and then every 100 ms of the workflow clock, which the
// environment skips ahead to when the workflows are idle). The earlier
// UpdateAt and At steps have settled by then; UpdateNoWaitAt updates may
// still be in flight. A condition never met fails the test.
func (h *Harness) WaitFor(d time.Duration, what string, cond func() bool) {
	h.seq.schedule(d, step{run: func(done func()) {
		var check func()
		check = func() {
			if cond() {
				h.seq.setWaiting("")
				done()
				return
			}
			h.seq.setWaiting(what)
			h.Env.RegisterDelayedCallback(check, 100*time.Millisecond)
		}
		check()
	}})
}

// LoopChildrenSettled is a WaitFor condition: the top-level loop lists at
// least n children and all of them have settled.
func (h *Harness) LoopChildrenSettled(n int) func() bool {
	return func() bool {
		d, ok := h.LoopDescription()
		if !ok || len(d.Children) < n {
			return false
		}
		for _, c := range d.Children {
			if c.State != wire.ChildSettled {
				return false
			}
		}
		return true
	}
}

// LoopChildStarted is a WaitFor condition: the top-level loop's n-th child
// (from 1) has started its execution, so updates can reach it.
func (h *Harness) LoopChildStarted(n int) func() bool {
	return func() bool {
		d, ok := h.LoopDescription()
		return ok && len(d.Children) >= n && d.Children[n-1].RunID != ""
	}
}

// LoopDescription queries the top-level loop.
func (h *Harness) LoopDescription() (wire.LoopDescription, bool) {
	var d wire.LoopDescription
	v, err := h.Env.QueryWorkflow(wire.QueryDescribe)
	if err != nil {
		return d, false
	}
	return d, v.Get(&d) == nil
}

// AtNoWait runs fn at d on the workflow clock, after the earlier UpdateAt
// and At steps, whatever UpdateNoWaitAt updates are still in flight.
func (h *Harness) AtNoWait(d time.Duration, fn func()) {
	h.seq.schedule(d, step{run: func(done func()) { fn(); done() }})
}

// UpdateAt sends an update at d once every earlier step settled, holds the
// sequence until it settles, and returns its future result.
func (h *Harness) UpdateAt(d time.Duration, wid, name string, args ...any) *Result {
	r := h.NewResult(name)
	h.seq.schedule(d, step{barrier: true, run: func(done func()) {
		r.then = done
		h.Send(r, wid, name, args...)
	}})
	return r
}

// UpdateNoWaitAt sends an update at d after the earlier UpdateAt and At
// steps, and lets the sequence go on while it is in flight; the next
// UpdateAt or at step waits for it.
func (h *Harness) UpdateNoWaitAt(d time.Duration, wid, name string, args ...any) *Result {
	r := h.NewResult(name)
	h.seq.schedule(d, step{run: func(done func()) {
		h.seq.hold()
		r.then = h.seq.release
		h.Send(r, wid, name, args...)
		done()
	}})
	return r
}
