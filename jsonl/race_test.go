package jsonl_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Environment of the helper process of TestRaceTwoProcessesOpenWrite.
const (
	raceHelperEnv = "SESSIONFLOW_JSONL_RACE_HELPER"
	raceRootEnv   = "SESSIONFLOW_JSONL_RACE_ROOT"
	raceHandleEnv = "SESSIONFLOW_JSONL_RACE_HANDLE"
)

// Results a helper process reports on stdout.
const (
	raceWon   = "result: won"
	raceOwned = "result: owned"
)

// TestHelperProcessOpenWrite is not a test: TestRaceTwoProcessesOpenWrite
// runs the test binary again with this test selected and raceHelperEnv set.
// The process says "ready", waits for a line on stdin, opens durID for
// write with its own handle id, reports the outcome, and exits without
// closing (a won lease outlives the process, as after a crash).
func TestHelperProcessOpenWrite(t *testing.T) {
	if os.Getenv(raceHelperEnv) != "1" {
		return
	}
	s, err := jsonl.NewStore(jsonl.Options{Root: os.Getenv(raceRootEnv), Compression: jsonl.CompressionNone, Logger: durQuiet})
	if err != nil {
		fmt.Printf("result: error: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Printf("result: error: %v\n", err)
		os.Exit(1)
	}
	_, err = s.Open(context.Background(), durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: os.Getenv(raceHandleEnv)})
	switch {
	case err == nil:
		fmt.Println(raceWon)
	case errors.Is(err, wire.ErrAlreadyOwned):
		fmt.Println(raceOwned)
	default:
		fmt.Printf("result: error: %v\n", err)
	}
	os.Exit(0)
}

// raceChild is a running helper process.
type raceChild struct {
	handle string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
}

func startRaceChild(t *testing.T, root, handle string) *raceChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessOpenWrite$", "-test.count=1")
	// A race-enabled binary sleeps a second at exit unless told otherwise.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), raceHelperEnv+"=1", raceRootEnv+"="+root, raceHandleEnv+"="+handle, "GORACE="+gorace)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &raceChild{handle: handle, cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// line reads the next stdout line of the child.
func (c *raceChild) line(t *testing.T) string {
	t.Helper()
	l, err := c.out.ReadString('\n')
	require.NoError(t, err, "helper %s: %q", c.handle, l)
	return strings.TrimSpace(l)
}

// raceStoredSession writes a small log for durID under root.
func raceStoredSession(t *testing.T, root string) {
	t.Helper()
	durWriteLog(t, root, jsonl.CompressionNone, durSeqEvents(t, 0, 3), []int{3})
}

// TestRaceTwoProcessesOpenWrite races two OS processes for the write handle
// of one session: exactly one wins each round and the other is told the
// session is already owned.
func TestRaceTwoProcessesOpenWrite(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	raceStoredSession(t, root)
	s := durStore(t, root, jsonl.CompressionNone, nil)
	for round := 0; round < 20; round++ {
		children := []*raceChild{
			startRaceChild(t, root, fmt.Sprintf("proc-%d-a", round)),
			startRaceChild(t, root, fmt.Sprintf("proc-%d-b", round)),
		}
		for _, c := range children {
			require.Equal(t, "ready", c.line(t))
		}
		for _, c := range children {
			_, err := io.WriteString(c.stdin, "go\n")
			require.NoError(t, err)
		}
		var winners []string
		for _, c := range children {
			switch res := c.line(t); res {
			case raceWon:
				winners = append(winners, c.handle)
			case raceOwned:
			default:
				t.Fatalf("round %d: helper %s: %s", round, c.handle, res)
			}
			require.NoError(t, c.cmd.Wait())
		}
		require.Len(t, winners, 1, "round %d: exactly one process must win", round)
		l, err := s.LeaseOf(ctx, durID)
		require.NoError(t, err)
		require.NotNil(t, l)
		require.Equal(t, winners[0], l.HandleID, "round %d: the lease names the winner", round)
		require.NoError(t, s.CloseHandle(ctx, jsonl.HandleRef{SessionID: durID, HandleID: winners[0], Access: jsonl.AccessWrite}))
	}
}

// raceRound runs n goroutines released together and returns their errors.
func raceRound(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// raceOneWinner checks that exactly one error is nil and the others match
// want, and returns the winner's index.
func raceOneWinner(t *testing.T, errs []error, want error, round int) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "round %d: goroutines %d and %d both won", round, winner, i)
			winner = i
			continue
		}
		require.ErrorIs(t, err, want, "round %d: goroutine %d", round, i)
	}
	require.NotEqual(t, -1, winner, "round %d: nobody won", round)
	return winner
}

// TestRaceGoroutinesOpenWrite races eight goroutines for one session's
// write handle, through eight stores over one root (the lease decides) and
// through one shared store (its in-process claim decides).
func TestRaceGoroutinesOpenWrite(t *testing.T) {
	ctx := context.Background()
	const n = 8
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "stores", true: "one-store"}[shared], func(t *testing.T) {
			root := t.TempDir()
			raceStoredSession(t, root)
			stores := make([]*jsonl.Store, n)
			for i := range stores {
				if i == 0 || !shared {
					stores[i] = durStore(t, root, jsonl.CompressionNone, nil)
				} else {
					stores[i] = stores[0]
				}
			}
			for round := 0; round < 10; round++ {
				handles := make([]*jsonl.Handle, n)
				errs := raceRound(n, func(i int) error {
					h, err := stores[i].Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: fmt.Sprintf("g-%d-%d", round, i)})
					handles[i] = h
					return err
				})
				w := raceOneWinner(t, errs, wire.ErrAlreadyOwned, round)
				// The winner really owns the session: it can append.
				next := durSeqEvents(t, handles[w].NextSeq(), 1)
				require.NoError(t, handles[w].Append(ctx, next))
				require.NoError(t, handles[w].Close(ctx))
			}
			r, err := durStore(t, root, jsonl.CompressionNone, nil).Open(ctx, durID, jsonl.AccessRead, jsonl.OpenOptions{})
			require.NoError(t, err)
			got, err := r.Read(ctx, 0, -1)
			require.NoError(t, err)
			durRequireEvents(t, durSeqEvents(t, 0, 13), got)
		})
	}
}

// TestRaceConcurrentCreate creates one id from eight goroutines: exactly one
// wins and the others are told the session already exists.
func TestRaceConcurrentCreate(t *testing.T) {
	ctx := context.Background()
	const n = 8
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "stores", true: "one-store"}[shared], func(t *testing.T) {
			root := t.TempDir()
			stores := make([]*jsonl.Store, n)
			for i := range stores {
				if i == 0 || !shared {
					stores[i] = durStore(t, root, jsonl.CompressionNone, nil)
				} else {
					stores[i] = stores[0]
				}
			}
			for round := 0; round < 10; round++ {
				hdr := durHeader()
				hdr.ID = fmt.Sprintf("created-%d", round)
				handles := make([]*jsonl.Handle, n)
				errs := raceRound(n, func(i int) error {
					h, err := stores[i].Create(ctx, hdr, jsonl.CreateOptions{HandleID: fmt.Sprintf("c-%d-%d", round, i)})
					handles[i] = h
					return err
				})
				w := raceOneWinner(t, errs, wire.ErrAlreadyExists, round)
				require.NoError(t, handles[w].Append(ctx, durSeqEvents(t, 0, 2)))
				require.NoError(t, handles[w].Close(ctx))
				l, err := stores[0].LeaseOf(ctx, hdr.ID)
				require.NoError(t, err)
				require.Nil(t, l, "round %d: a losing create must not keep a lease", round)
			}
			list, err := durStore(t, root, jsonl.CompressionNone, nil).List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 10)
		})
	}
}

// TestRaceZombieOpenAfterClose closes handle ids before their open or
// create runs, as when Temporal gave up on an activity attempt that still
// runs: the late open fails as revoked and leaves no lease behind.
func TestRaceZombieOpenAfterClose(t *testing.T) {
	ctx := context.Background()
	t.Run("create", func(t *testing.T) {
		root := t.TempDir()
		s := durStore(t, root, jsonl.CompressionNone, nil)
		ref := jsonl.HandleRef{SessionID: durID, HandleID: "zombie-create", Access: jsonl.AccessWrite}
		require.NoError(t, s.CloseHandle(ctx, ref))
		for _, st := range []*jsonl.Store{s, durStore(t, root, jsonl.CompressionNone, nil)} {
			_, err := st.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: ref.HandleID})
			require.ErrorIs(t, err, wire.ErrHandleRevoked)
			l, err := st.LeaseOf(ctx, durID)
			require.NoError(t, err)
			require.Nil(t, l)
			snap, err := st.Stat(ctx, durID)
			require.NoError(t, err)
			require.Nil(t, snap, "a revoked create must not leave a pending session")
		}
		// The id itself is free: a live handle creates it.
		h, err := s.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: "live"})
		require.NoError(t, err)
		require.NoError(t, h.Close(ctx))
	})
	t.Run("open", func(t *testing.T) {
		root := t.TempDir()
		raceStoredSession(t, root)
		s := durStore(t, root, jsonl.CompressionNone, nil)
		ref := jsonl.HandleRef{SessionID: durID, HandleID: "zombie-open", Access: jsonl.AccessWrite}
		require.NoError(t, s.CloseHandle(ctx, ref))
		for _, st := range []*jsonl.Store{s, durStore(t, root, jsonl.CompressionNone, nil)} {
			_, err := st.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: ref.HandleID})
			require.ErrorIs(t, err, wire.ErrHandleRevoked)
			l, err := st.LeaseOf(ctx, durID)
			require.NoError(t, err)
			require.Nil(t, l)
		}
		h, err := s.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "live"})
		require.NoError(t, err)
		require.NoError(t, h.Close(ctx))
	})
	// An open racing with the close of its own handle id, from another
	// store: whatever the interleaving, no lease survives both.
	for _, kind := range []string{"open", "create"} {
		t.Run("racing-"+kind, func(t *testing.T) {
			root := t.TempDir()
			if kind == "open" {
				raceStoredSession(t, root)
			}
			a := durStore(t, root, jsonl.CompressionNone, nil)
			b := durStore(t, root, jsonl.CompressionNone, nil)
			for round := 0; round < 20; round++ {
				ref := jsonl.HandleRef{SessionID: durID, HandleID: fmt.Sprintf("zombie-%s-%d", kind, round), Access: jsonl.AccessWrite}
				var h *jsonl.Handle
				errs := raceRound(2, func(i int) error {
					if i == 1 {
						return b.CloseHandle(ctx, ref)
					}
					var err error
					if kind == "open" {
						h, err = a.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: ref.HandleID})
					} else {
						h, err = a.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: ref.HandleID})
					}
					return err
				})
				require.NoError(t, errs[1], "round %d", round)
				if errs[0] != nil {
					require.ErrorIs(t, errs[0], wire.ErrHandleRevoked, "round %d", round)
				} else {
					// The open won the race and the close then took the
					// lease away: the handle can no longer write.
					err := h.Append(ctx, durSeqEvents(t, h.NextSeq(), 1))
					require.Error(t, err, "round %d", round)
					require.True(t, errors.Is(err, wire.ErrOwnershipLost) || errors.Is(err, wire.ErrHandleClosed), "round %d: %v", round, err)
				}
				for _, st := range []*jsonl.Store{a, b} {
					l, err := st.LeaseOf(ctx, durID)
					require.NoError(t, err)
					require.Nil(t, l, "round %d: a lease survived the close of its handle", round)
				}
			}
		})
	}
}

// TestRaceHandleClosedElsewhere closes a live write handle from another
// store: the first store's later append fails and writes nothing, also when
// a new owner has taken the lease meanwhile.
func TestRaceHandleClosedElsewhere(t *testing.T) {
	ctx := context.Background()
	for _, reopened := range []bool{false, true} {
		t.Run(map[bool]string{false: "closed", true: "reowned"}[reopened], func(t *testing.T) {
			root := t.TempDir()
			raceStoredSession(t, root)
			path := durLogPath(t, root, jsonl.CompressionNone)
			a := durStore(t, root, jsonl.CompressionNone, nil)
			b := durStore(t, root, jsonl.CompressionNone, nil)
			h, err := a.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "first"})
			require.NoError(t, err)
			require.NoError(t, h.Append(ctx, durSeqEvents(t, 3, 1)))
			require.NoError(t, b.CloseHandle(ctx, h.Ref()))
			var other *jsonl.Handle
			if reopened {
				other, err = b.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "second"})
				require.NoError(t, err)
			}
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			err = h.Append(ctx, durSeqEvents(t, 4, 1))
			require.True(t, errors.Is(err, wire.ErrOwnershipLost) || errors.Is(err, wire.ErrHandleClosed), "%v", err)
			// Flush of a materialized log writes nothing; it may succeed.
			if err := h.Flush(ctx); err != nil {
				require.True(t, errors.Is(err, wire.ErrOwnershipLost) || errors.Is(err, wire.ErrHandleClosed), "%v", err)
			}
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, before, after, "the closed handle wrote")

			// A fresh attach of the closed handle id is refused too.
			err = durStore(t, root, jsonl.CompressionNone, nil).Attach(h.Ref()).Append(ctx, durSeqEvents(t, 4, 1))
			require.True(t, errors.Is(err, wire.ErrOwnershipLost) || errors.Is(err, wire.ErrHandleClosed), "%v", err)

			if reopened {
				require.NoError(t, other.Append(ctx, durSeqEvents(t, 4, 1)))
				require.NoError(t, other.Close(ctx))
			}
			require.NoError(t, h.Close(ctx), "closing a handle that lost its lease succeeds")
			r, err := b.Open(ctx, durID, jsonl.AccessRead, jsonl.OpenOptions{})
			require.NoError(t, err)
			got, err := r.Read(ctx, 0, -1)
			require.NoError(t, err)
			want := 4
			if reopened {
				want = 5
			}
			durRequireEvents(t, durSeqEvents(t, 0, int64(want)), got)
			require.NoError(t, session.CheckContiguous(durID, 0, got))
		})
	}
}
