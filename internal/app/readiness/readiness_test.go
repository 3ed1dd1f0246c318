package readiness

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var errNotYet = errors.New("connection refused")

func TestWaitReturnsOnceTheProbeSucceeds(t *testing.T) {
	calls := 0
	err := Wait(context.Background(), Options{Interval: time.Millisecond}, func(context.Context) error {
		calls++
		if calls < 3 {
			return errNotYet
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
}

// A process that exits ends the wait at once, with its exit status and its
// own output, long before the timeout.
func TestWaitFailsWhenTheProcessExits(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo 'bind: address already in use' >&2; exit 3")
	var out syncOut
	cmd.Stderr = &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Wait(ctx, Options{What: "the server", Timeout: time.Hour, Exited: exited,
		ExitErr: func() error { return exitErr }, Log: out.String},
		func(context.Context) error { return errNotYet })
	require.ErrorIs(t, err, ErrExited)
	require.NotErrorIs(t, err, ErrTimedOut)
	require.NoError(t, ctx.Err(), "the wait outlived the test's own deadline")
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, "exit status 3", re.Exit.Error())
	require.Contains(t, err.Error(), "the server: the process exited before it was ready")
	require.Contains(t, err.Error(), "bind: address already in use")
	require.Contains(t, err.Error(), "exit status 3")
}

// An exit also interrupts a probe that is blocked.
func TestWaitInterruptsABlockedProbeOnExit(t *testing.T) {
	exited := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(exited) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Wait(ctx, Options{Timeout: time.Hour, Exited: exited}, func(pctx context.Context) error {
		<-pctx.Done()
		return pctx.Err()
	})
	require.ErrorIs(t, err, ErrExited)
	require.NoError(t, ctx.Err())
}

func TestWaitTimesOutWithTheLastProbeError(t *testing.T) {
	err := Wait(context.Background(), Options{What: "the server", Timeout: 20 * time.Millisecond, Interval: time.Millisecond,
		Log: func() string { return "" }},
		func(context.Context) error { return errNotYet })
	require.ErrorIs(t, err, ErrTimedOut)
	require.ErrorIs(t, err, errNotYet)
	require.Contains(t, err.Error(), "the server: not ready within the timeout")
	require.Contains(t, err.Error(), "last probe: connection refused")
	require.Contains(t, err.Error(), "the server wrote nothing")
}

func TestWaitEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Wait(ctx, Options{Timeout: time.Hour}, func(context.Context) error { return errNotYet })
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrTimedOut)
}

// syncOut collects a process's output; it is read only after the process
// was waited for.
type syncOut struct{ b []byte }

func (s *syncOut) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *syncOut) String() string              { return string(s.b) }
