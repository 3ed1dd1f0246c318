package jsonl_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// manyProjects fills a root with n project directories (cwds /many/00,
// /many/01, ...), each holding one unrelated session, so that a lookup checks
// them concurrently.
func manyProjects(t *testing.T, e *env, n int) {
	t.Helper()
	for i := range n {
		persist(t, e.store, header(fmt.Sprintf("filler-%02d", i), manyCwd(i)), completedTurn(t, 0, 1)...)
	}
}

func manyCwd(i int) string { return fmt.Sprintf("/many/%02d", i) }

// A root of 40 project directories: a session is found in whichever holds
// it, an absent id is absent, an id in two of them is a duplicate.
func TestLocateInManyProjectDirectories(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	manyProjects(t, e, 40)
	persist(t, e.store, header("target", manyCwd(27)), completedTurn(t, 0, 1)...)

	fresh := e.newStore(nil)
	require.Len(t, readAll(t, fresh, "target"), 6)
	st, err := fresh.Stat(bg, "absent")
	require.NoError(t, err)
	require.Nil(t, st)

	// The same id placed by hand in a second project directory.
	src := sessionDir(t, e.root, manyCwd(27), "target")
	dup := sessionDir(t, e.root, manyCwd(3), "target")
	require.NoError(t, os.MkdirAll(dup, 0o755))
	require.NoError(t, os.WriteFile(dup+"/"+generationName(jsonl.CompressionNone), readFile(t, src+"/"+generationName(jsonl.CompressionNone)), 0o644))
	_, err = e.newStore(nil).Stat(bg, "target")
	require.EqualError(t, err, `duplicate JSONL session id "target" appears in multiple project directories`)
}

// The checks run concurrently but are judged in project order: of two
// damaged entries, the one in the first project directory is reported, as a
// lookup checking them one by one would.
func TestLocateInManyProjectDirectoriesReportsTheFirstDamage(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	manyProjects(t, e, 40)
	first := sessionDir(t, e.root, manyCwd(9), "odd")
	later := sessionDir(t, e.root, manyCwd(33), "odd")
	require.NoError(t, os.WriteFile(first, []byte("x"), 0o644))
	require.NoError(t, os.Symlink(t.TempDir(), later))
	for range 5 {
		_, err := e.newStore(nil).Open(bg, "odd", jsonl.AccessRead, jsonl.OpenOptions{})
		require.EqualError(t, err, "session directory "+strconv.Quote(first)+" is not a directory")
	}
	require.NoError(t, os.Remove(first))
	_, err := e.newStore(nil).Open(bg, "odd", jsonl.AccessRead, jsonl.OpenOptions{})
	require.ErrorContains(t, err, strconv.Quote(later))
}
