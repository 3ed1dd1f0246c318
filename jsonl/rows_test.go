package jsonl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// page reads at most limit rows after cursor; it returns the ids and the
// cursor of the last row.
func page(t *testing.T, st *jsonl.Store, after string, limit int) ([]string, string) {
	t.Helper()
	var ids []string
	last := after
	for row, err := range st.Rows(bg, after) {
		require.NoError(t, err)
		if len(ids) == limit {
			break
		}
		ids = append(ids, row.Header.ID)
		last = row.Cursor
	}
	return ids, last
}

// TestRowsPagesLoseAndRepeatNothing: paging through Rows with a cursor
// lists every session once, in directory order, including when sessions are
// created and deleted between pages; a session created after the cursor
// shows up, one created before it does not.
func TestRowsPagesLoseAndRepeatNothing(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		var all []string
		for p, cwd := range []string{"/a", "/b", ""} {
			for i := 0; i < 5; i++ {
				id := fmt.Sprintf("p%d-s%02d", p, i*2)
				persist(t, e.store, header(id, cwd), completedTurn(t, 0, 1)...)
				all = append(all, id)
			}
		}
		pending := create(t, e.store, header("p1-s05", "/b"))
		defer pending.Close(bg)

		seen := map[string]int{}
		var order []string
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 20)
			ids, next := page(t, e.store, cursor, 4)
			if len(ids) == 0 {
				break
			}
			for _, id := range ids {
				seen[id]++
				order = append(order, id)
			}
			if pages == 1 {
				// Between pages: one session before the cursor, one after.
				persist(t, e.store, header("p0-s01", "/a"), completedTurn(t, 0, 1)...)
				persist(t, e.store, header("p2-s09", ""), completedTurn(t, 0, 1)...)
			}
			cursor = next
		}
		for _, id := range append(all, "p1-s05", "p2-s09") {
			require.Equal(t, 1, seen[id], "%s listed %d times", id, seen[id])
		}
		require.Zero(t, seen["p0-s01"], "a session created before the cursor is not listed")
		require.Len(t, order, len(all)+2)
		// Directory order: "--a--" < "--b--" < "_no-cwd", then by name.
		require.Equal(t, []string{"p0-s00", "p0-s02", "p0-s04", "p0-s06", "p0-s08", "p1-s00", "p1-s02", "p1-s04", "p1-s05", "p1-s06", "p1-s08"}, order[:11])
	})
}

// TestRowsStreamStopsWhenTheCallerStops: a listing stopped after its first
// row reads no further session directory.
func TestRowsStreamStopsWhenTheCallerStops(t *testing.T) {
	e := newEnv(t, jsonl.CompressionZstd, nil)
	for i := 0; i < 3; i++ {
		persist(t, e.store, header(fmt.Sprintf("s%d", i), "/w"), completedTurn(t, 0, 1)...)
	}
	// Damage the later sessions' directories: a read of them would show.
	for _, id := range []string{"s1", "s2"} {
		require.NoError(t, os.Chmod(sessionDir(t, e.root, "/w", id), 0))
	}
	defer func() {
		for _, id := range []string{"s1", "s2"} {
			_ = os.Chmod(sessionDir(t, e.root, "/w", id), 0o700)
		}
	}()
	ids, cursor := page(t, e.store, "", 1)
	require.Equal(t, []string{"s0"}, ids)
	require.Equal(t, "--w--/s0", cursor)
}

// TestRowsMatchList: Rows yields the rows of List, problems included: a
// damaged session, an id in two project directories, a log of the other
// encoding (a Problem row: Rows does not scan the root first).
func TestRowsMatchList(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		persist(t, e.store, header("ok", "/w"), completedTurn(t, 0, 1)...)
		persist(t, e.store, header("dup", "/w"), completedTurn(t, 0, 1)...)
		// The same id in another project directory.
		dupDir := sessionDir(t, e.root, "/v", "dup")
		require.NoError(t, os.MkdirAll(dupDir, 0o700))
		writeFile(t, filepath.Join(dupDir, generationName(comp)),
			encodeLog(t, comp, headerLine(header("dup", "/v")), lines(t, completedTurn(t, 0, 1)...)))
		// A symlinked log.
		bad := sessionDir(t, e.root, "/w", "bad")
		require.NoError(t, os.MkdirAll(bad, 0o700))
		require.NoError(t, os.Symlink(e.logPath("/w", "ok"), filepath.Join(bad, generationName(comp))))

		list, err := e.store.List(bg)
		require.NoError(t, err)
		var rows []jsonl.Snapshot
		for row, err := range e.newStore(nil).Rows(bg, "") {
			require.NoError(t, err)
			rows = append(rows, row.Snapshot)
		}
		require.ElementsMatch(t, list, rows)
		problems := 0
		for _, r := range rows {
			if r.Problem != nil {
				problems++
			}
		}
		require.Equal(t, 3, problems, "two duplicate rows and the symlink: %+v", rows)

		// A log of the other encoding is a problem row of its own.
		foreign := sessionDir(t, e.root, "/w", "foreign")
		require.NoError(t, os.MkdirAll(foreign, 0o700))
		otherComp := jsonl.CompressionZstd
		if comp == jsonl.CompressionZstd {
			otherComp = jsonl.CompressionNone
		}
		writeFile(t, filepath.Join(foreign, generationName(otherComp)), encodeLog(t, otherComp, headerLine(header("foreign", "/w"))))
		found := false
		for row, err := range e.newStore(nil).Rows(bg, "") {
			require.NoError(t, err)
			if row.Header.ID == "foreign" {
				require.NotNil(t, row.Problem)
				require.Equal(t, jsonl.CodeLayout, row.Problem.Code)
				require.Contains(t, row.Problem.Reason, "but this backend is configured for compression")
				found = true
			}
		}
		require.True(t, found)
	})
}

// TestRowsInvalidCursor: a cursor that no row carries is refused with a
// typed error.
func TestRowsInvalidCursor(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	persist(t, e.store, header("a", "/w"), completedTurn(t, 0, 1)...)
	for _, c := range []string{"nope", "--w--/a/b", "x/y", "--w--/.."} {
		n := 0
		for _, err := range e.store.Rows(bg, c) {
			n++
			requireCode(t, err, wire.ErrInvalidArgument)
			require.EqualError(t, err, fmt.Sprintf("invalid list cursor %q: pass the cursor of a listed row", c))
		}
		require.Equal(t, 1, n)
	}
}
