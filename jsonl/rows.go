package jsonl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Row is one row of a streamed listing (Rows): a session's snapshot, or a
// row with a Problem, and the cursor that resumes the listing after it.
type Row struct {
	Snapshot
	// Cursor resumes the listing after this row: pass it to Rows. It is
	// opaque to callers (today the row's project and session directory
	// names) and stays valid while sessions are created and deleted.
	Cursor string `json:"cursor"`
}

// Rows streams the sessions of the root, pending ones included, in the
// order of their directories (project directory name, then session
// directory name, in byte order), starting after the cursor after ("" for
// the start). Rows are read as they are yielded: one project directory's
// names at a time, one session directory per row, so the first row comes
// at once on a root of any size; stop the iteration to stop reading.
//
// Rows are the rows of List (docs/DECISIONS.md D51): an entry the store
// cannot serve is a row with a Problem and the listing goes on; an id found
// in two project directories is a Problem row in each. Unlike List, Rows
// does not scan the root for the other encoding first: a session directory
// holding a log of the other encoding is a Problem row. A failure to read
// the root, a root marker that disagrees with the store, an invalid cursor
// and a done context end the listing with an error (a zero Row).
//
// Paging: keep the Cursor of the last row read and pass it to the next
// call. A row present during both calls is listed exactly once; a session
// created meanwhile appears if it sorts after the cursor.
func (s *Store) Rows(ctx context.Context, after string) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		c, err := parseCursor(after)
		if err == nil {
			err = ctx.Err()
			if err != nil {
				err = context.Cause(ctx)
			}
		}
		if err == nil {
			err = s.checkRoot()
		}
		if err != nil {
			yield(Row{}, err)
			return
		}
		entries, err := s.fs.ReadDir(s.root)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				yield(Row{}, err)
			}
			return
		}
		w := rowWalk{s: s, ctx: ctx, after: c, yield: yield}
		for _, e := range entries {
			if isProjectDirName(e.Name()) && e.Type().IsDir() {
				w.projects = append(w.projects, filepath.Join(s.root, e.Name()))
			}
		}
		start := sort.Search(len(entries), func(i int) bool { return entries[i].Name() >= c.project })
		for _, e := range entries[start:] {
			if !isProjectDirName(e.Name()) {
				continue
			}
			if !w.project(e) {
				return
			}
		}
	}
}

// cursor is a parsed Rows cursor: the row keys (project, session) it has
// passed. The zero cursor is the start; a project-level row (a project
// entry that is not a directory) has session "".
type cursor struct {
	project, session string
	set              bool
}

// parseCursor reads a cursor of Row.Cursor.
func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	project, session, ok := strings.Cut(s, "/")
	if !ok || !isProjectDirName(project) || strings.Contains(session, "/") || session == "." || session == ".." {
		return cursor{}, invalidArgument("", fmt.Errorf("invalid list cursor %q: pass the cursor of a listed row", s))
	}
	return cursor{project: project, session: session, set: true}, nil
}

// passed reports whether the row keyed (project, session) is at or before
// the cursor.
func (c cursor) passed(project, session string) bool {
	if !c.set {
		return false
	}
	return project < c.project || (project == c.project && session <= c.session)
}

// rowWalk is the state of one Rows iteration.
type rowWalk struct {
	s        *Store
	ctx      context.Context
	after    cursor
	projects []string // every project directory, for the duplicate check
	yield    func(Row, error) bool
}

// emit yields one row keyed (project, session); false stops the walk.
func (w *rowWalk) emit(snap Snapshot, project, session string) bool {
	return w.yield(Row{Snapshot: snap, Cursor: project + "/" + session}, nil)
}

// project lists one root entry named like a project directory.
func (w *rowWalk) project(e fs.DirEntry) bool {
	s, name := w.s, e.Name()
	path := filepath.Join(s.root, name)
	if !e.Type().IsDir() {
		if w.after.passed(name, "") {
			return true
		}
		return w.emit(problemRow("", path, s.oddProjectError(e)), name, "")
	}
	entries, err := s.fs.ReadDir(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || w.after.passed(name, "") {
			return true
		}
		return w.emit(problemRow("", path, err), name, "")
	}
	start := 0
	if w.after.set && w.after.project == name {
		start = sort.Search(len(entries), func(i int) bool { return entries[i].Name() > w.after.session })
	}
	for _, e := range entries[start:] {
		if err := w.ctx.Err(); err != nil {
			w.yield(Row{}, context.Cause(w.ctx))
			return false
		}
		snap, ok := w.session(path, e)
		if ok && !w.emit(snap, name, e.Name()) {
			return false
		}
	}
	return true
}

// session reads the row of one project directory entry; ok=false when the
// entry holds no session.
func (w *rowWalk) session(project string, e os.DirEntry) (Snapshot, bool) {
	s := w.s
	path := filepath.Join(project, e.Name())
	id, named := decodeSegment(e.Name())
	if !e.Type().IsDir() {
		if named && e.Type()&fs.ModeSymlink != 0 {
			return problemRow(id, path, withSession(symlinkError("session directory", path), id)), true
		}
		return Snapshot{}, false
	}
	snap, err := s.listEntry(path)
	switch {
	case err != nil:
		return problemRow(id, path, withSession(err, id)), true
	case snap == nil:
		return Snapshot{}, false
	}
	if seg, err := EncodeSegment(snap.Header.ID); err != nil || seg != e.Name() {
		return problemRow(id, path, foreignHeader(path, snap)), true
	}
	if w.elsewhere(project, e.Name(), snap.Header.ID) {
		return problemRow(snap.Header.ID, snap.Path, duplicateID(snap.Header.ID)), true
	}
	return *snap, true
}

// elsewhere reports whether another project directory holds a healthy
// session with the same id: one Lstat per other project directory, and a
// read only where the directory exists.
func (w *rowWalk) elsewhere(project, seg, id string) bool {
	for _, q := range w.projects {
		if q == project {
			continue
		}
		dir := filepath.Join(q, seg)
		fi, err := w.s.fs.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if snap, err := w.s.listEntry(dir); err == nil && snap != nil && snap.Header.ID == id {
			return true
		}
	}
	return false
}
