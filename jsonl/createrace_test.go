package jsonl_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// Environment of the helper processes of TestRaceCreateAcrossProjects.
const (
	createHelperEnv = "SESSIONFLOW_JSONL_CREATE_HELPER"
	createRootEnv   = "SESSIONFLOW_JSONL_CREATE_ROOT"
	createCwdEnv    = "SESSIONFLOW_JSONL_CREATE_CWD"
)

// Results a create helper reports, one line per round.
const (
	createWon    = "won"
	createExists = "exists"
)

// TestHelperProcessCreate is not a test: TestRaceCreateAcrossProjects runs
// the test binary again with this test selected and createHelperEnv set.
// The process says "ready", then for every line "<id>" on stdin does what
// `starter log create --id <id> --cwd <its cwd>` does (create, flush, close)
// and reports the outcome on one line.
func TestHelperProcessCreate(t *testing.T) {
	if os.Getenv(createHelperEnv) != "1" {
		return
	}
	s, err := jsonl.NewStore(jsonl.Options{Root: os.Getenv(createRootEnv), Compression: jsonl.CompressionNone, Logger: durQuiet})
	if err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(1)
	}
	cwd := os.Getenv(createCwdEnv)
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	ctx := context.Background()
	for n := 0; in.Scan(); n++ {
		id := in.Text()
		h, err := s.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1, Cwd: cwd},
			jsonl.CreateOptions{HandleID: fmt.Sprintf("%s/%s/%d", cwd, id, n)})
		if err == nil {
			err = errors.Join(h.Flush(ctx), h.Close(ctx))
		}
		switch {
		case err == nil:
			fmt.Println(createWon)
		case errors.Is(err, wire.ErrAlreadyExists):
			fmt.Println(createExists)
		default:
			fmt.Printf("error: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	os.Exit(0)
}

// TestRaceCreateAcrossProjects races 8 OS processes, each with its own
// working directory (so its own project directory), to create the same
// session id, round after round: exactly one wins each round, the others are
// told the session exists, no lease is left behind, and the id lives in one
// project directory only.
func TestRaceCreateAcrossProjects(t *testing.T) {
	const procs, rounds = 8, 150
	ctx := context.Background()
	root := t.TempDir()
	type child struct {
		cwd   string
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	children := make([]*child, procs)
	for i := range children {
		cwd := fmt.Sprintf("/work/p%d", i)
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessCreate$", "-test.count=1")
		gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
		cmd.Env = append(os.Environ(), createHelperEnv+"=1", createRootEnv+"="+root, createCwdEnv+"="+cwd, "GORACE="+gorace)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
		children[i] = &child{cwd: cwd, stdin: stdin, out: bufio.NewReader(stdout)}
	}
	readLine := func(c *child) string {
		l, err := c.out.ReadString('\n')
		require.NoError(t, err, "helper %s: %q", c.cwd, l)
		return strings.TrimSpace(l)
	}
	for _, c := range children {
		require.Equal(t, "ready", readLine(c))
	}
	s := durStore(t, root, jsonl.CompressionNone, nil)
	for round := range rounds {
		id := fmt.Sprintf("race-%d", round)
		for _, c := range children {
			_, err := io.WriteString(c.stdin, id+"\n")
			require.NoError(t, err)
		}
		var winners []string
		for _, c := range children {
			switch res := readLine(c); res {
			case createWon:
				winners = append(winners, c.cwd)
			case createExists:
			default:
				t.Fatalf("round %d: helper %s: %s", round, c.cwd, res)
			}
		}
		require.Len(t, winners, 1, "round %d: exactly one creator must win", round)
		l, err := s.LeaseOf(ctx, id)
		require.NoError(t, err, "round %d", round)
		require.Nil(t, l, "round %d: no lease may be left behind", round)
		seg, err := jsonl.EncodeSegment(id)
		require.NoError(t, err)
		dirs, err := filepath.Glob(filepath.Join(root, "*", seg))
		require.NoError(t, err)
		require.Len(t, dirs, 1, "round %d: the id must live in one project directory: %v", round, dirs)
		require.Equal(t, sessionDir(t, root, winners[0], id), dirs[0], "round %d", round)
		snap, err := s.Stat(ctx, id)
		require.NoError(t, err)
		require.Equal(t, winners[0], snap.Header.Cwd, "round %d", round)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, rounds)
	for _, row := range list {
		require.Nil(t, row.Problem, "%s", row.Header.ID)
	}
	// The create locks are gone with their creators.
	locks, err := os.ReadDir(filepath.Join(root, ".create-locks"))
	require.NoError(t, err)
	require.Empty(t, locks)
}

// TestCloseReleasesLeaseDespiteDuplicate: a close that finds its session id
// in a second project directory releases its lease first and reports the
// duplicate after, instead of failing its lookup and keeping the lease.
func TestCloseReleasesLeaseDespiteDuplicate(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		h := create(t, e.store, header("dup", "/p1"))
		require.NoError(t, h.Flush(bg))
		lease := filepath.Join(sessionDir(t, e.root, "/p1", "dup"), "session.lock")
		require.FileExists(t, lease)
		// The same id appears in another project directory behind the store's
		// back (another harness sharing the root).
		e.writeLog(header("dup", "/p2"))

		err := h.Close(bg)
		requireCode(t, err, wire.ErrLayout)
		require.EqualError(t, err, `duplicate JSONL session id "dup" appears in multiple project directories`)
		noSuchFile(t, lease)
		require.FileExists(t, e.logPath("/p1", "dup"), "close removes the lease, never the log")

		// A handle attached in another process releases the same way.
		h2, err := e.newStore(nil).Create(bg, header("dup2", "/p1"), jsonl.CreateOptions{HandleID: "h-dup2"})
		require.NoError(t, err)
		require.NoError(t, h2.Flush(bg))
		e.writeLog(header("dup2", "/p2"))
		err = e.newStore(nil).CloseHandle(bg, jsonl.HandleRef{SessionID: "dup2", HandleID: "h-dup2", Access: jsonl.AccessWrite})
		requireCode(t, err, wire.ErrLayout)
		noSuchFile(t, filepath.Join(sessionDir(t, e.root, "/p1", "dup2"), "session.lock"))
	})
}

// createLockPath is the create lock of id: <root>/.create-locks/<first 16
// bytes of sha256(id), hex>.
func createLockPath(root, id string) string {
	return filepath.Join(root, ".create-locks", sha256Hex(id)[:32])
}

// TestCreateLockIsCrashSafe: the create lock of an id is an flock, so a lock
// file left by a creator that died does not block the id, while a live
// holder makes a create wait.
func TestCreateLockIsCrashSafe(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	path := createLockPath(e.root, "crashed")
	writeFile(t, path, nil) // left behind by a creator killed mid-create
	h := create(t, e.store, header("crashed", "/w"))
	require.NoError(t, h.Close(bg))
	noSuchFile(t, path)

	// A live holder (another process's descriptor) makes a create wait.
	writeFile(t, path, nil)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	_, err = e.store.Create(ctx, header("crashed", "/other"), jsonl.CreateOptions{HandleID: newHandleID()})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, f.Close()) // the holder dies
	h = create(t, e.store, header("crashed", "/other"))
	require.NoError(t, h.Close(bg))
}
