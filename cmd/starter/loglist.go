package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/jsonl"
)

// listEntry is one session in `log list --json`.
type listEntry struct {
	ID string `json:"id"`
	// FormatVersion is the log format (3, or 0 for the published DeepSeek
	// Harness's format); absent on an entry with an Error.
	FormatVersion *int   `json:"formatVersion,omitempty"`
	Cwd           string `json:"cwd"`
	ParentSession string `json:"parentSession,omitempty"`
	CreatedAt     int64  `json:"createdAt"`
	Size          int64  `json:"size"`
	Pending       bool   `json:"pending"`
	Revision      string `json:"revision"`
	Path          string `json:"path,omitempty"`
	// Error is set on an entry the store cannot serve (a damaged session
	// directory, an id in two project directories, a symlinked project
	// directory); only id (when the directory name decodes to one) and path
	// are then meaningful.
	Error *jsonl.Problem `json:"error,omitempty"`
	// Cursor resumes the listing after this entry (--cursor).
	Cursor string `json:"cursor"`
	// depth indents the id in the table of --tree.
	depth int
}

// listBlock is the number of rows of `log list` aligned together: the
// table is written block by block as the rows are read.
const listBlock = 64

const logListLong = `List the sessions of the root as they are read, in the order of their
directories (project directory, then session directory): id, cwd, creation
time, log size in bytes, whether it is pending (created but never written),
its revision and its parent (the session it was forked from, the header's
parentSession; "-" for none). A missing root lists nothing. The first rows
come at once on a root of any size; columns are aligned in blocks of 64 rows.

--json prints one JSON object per line, which also carries "formatVersion"
(3, or 0 for a log of the published DeepSeek Harness) and "cursor".

--tree reads the whole root first and prints each session under the session
it was forked from, its id indented two spaces a generation (a session whose
parent is not in the root is listed at the top level); it takes no --limit,
--cursor or --json.

Paging: --limit N stops after N rows; when more rows follow, the line
"next page: --cursor <CURSOR>" goes to standard error. --cursor CURSOR lists
the rows after the row that carried CURSOR (in --json, its "cursor"; any row's
cursor resumes after it). A row present during both calls is listed exactly
once; a session created meanwhile appears if it sorts after the cursor.

An entry the store cannot serve (a log of a format this build does not read, a
malformed header, two generations of which the newer is not a migration of the
older, a symlink or FIFO where a log should be, a log of the other encoding, an
unreadable or symlinked directory, an id found in two project directories) is
listed with its error, in an ERROR column (in --json, an "error" object with
"reason" and "code"), and the listing goes on.`

func newLogListCmd(a *app, sf *storeFlags) *cobra.Command {
	var (
		asJSON bool
		tree   bool
		limit  int
		after  string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the sessions of the root",
		Long:  logListLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit must be >= 0, got %d", limit)
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			if tree {
				if asJSON || limit > 0 || after != "" {
					return usageErrorf("--tree takes no --json, --limit or --cursor")
				}
				var all []listEntry
				for row, err := range st.Rows(cmd.Context(), "") {
					if err != nil {
						return err
					}
					all = append(all, entryOf(row))
				}
				out := &tableWriter{w: a.stdout}
				for _, e := range treeOrder(all) {
					if err := out.row(e); err != nil {
						return err
					}
				}
				return out.finish(len(all), st.Root())
			}
			var out rowWriter = &tableWriter{w: a.stdout}
			if asJSON {
				out = &jsonLinesWriter{enc: json.NewEncoder(a.stdout)}
			}
			n, last := 0, ""
			for row, err := range st.Rows(cmd.Context(), after) {
				if err != nil {
					return err
				}
				if limit > 0 && n == limit {
					if err := out.finish(n, st.Root()); err != nil {
						return err
					}
					_, err := fmt.Fprintf(a.stderr, "next page: --cursor %s\n", last)
					return err
				}
				if err := out.row(entryOf(row)); err != nil {
					return err
				}
				n, last = n+1, row.Cursor
			}
			return out.finish(n, st.Root())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line")
	cmd.Flags().IntVar(&limit, "limit", 0, "stop after N rows (0: no limit)")
	cmd.Flags().StringVar(&after, "cursor", "", "list the rows after the row that carried this cursor")
	cmd.Flags().BoolVar(&tree, "tree", false, "print each session under its parent, indented")
	return cmd
}

// entryOf renders a listed row.
func entryOf(r jsonl.Row) listEntry {
	e := listEntry{ID: r.Header.ID, Cwd: r.Header.Cwd, ParentSession: r.Header.ParentSession,
		CreatedAt: r.Header.CreatedAt, Size: r.SizeBytes, Pending: r.Pending, Revision: r.Revision,
		Path: r.Path, Error: r.Problem, Cursor: r.Cursor}
	if r.Problem == nil {
		v := r.Header.Version
		e.FormatVersion = &v
	}
	return e
}

// rowWriter prints the rows of `log list` as they come.
type rowWriter interface {
	row(e listEntry) error
	// finish ends the listing after n rows.
	finish(n int, root string) error
}

// jsonLinesWriter prints one JSON object per row.
type jsonLinesWriter struct{ enc *json.Encoder }

func (j *jsonLinesWriter) row(e listEntry) error {
	j.enc.SetEscapeHTML(false)
	return j.enc.Encode(e)
}

func (j *jsonLinesWriter) finish(int, string) error { return nil }

// tableWriter prints the table block by block. The first block decides
// whether the table has an ERROR column; a damaged row of a later block
// carries its error in an eighth column all the same.
type tableWriter struct {
	w       io.Writer
	tw      *tabwriter.Writer
	pending []listEntry
	damaged bool
	started bool
}

func (t *tableWriter) row(e listEntry) error {
	t.pending = append(t.pending, e)
	if len(t.pending) == listBlock {
		return t.flush()
	}
	return nil
}

func (t *tableWriter) finish(n int, root string) error {
	if n == 0 {
		_, err := fmt.Fprintf(t.w, "no sessions under %s\n", root)
		return err
	}
	return t.flush()
}

// flush writes the pending block.
func (t *tableWriter) flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	t.tw = tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	if !t.started {
		for _, e := range t.pending {
			t.damaged = t.damaged || e.Error != nil
		}
		header := "ID\tCWD\tCREATED\tSIZE\tPENDING\tREVISION\tPARENT"
		if t.damaged {
			header += "\tERROR"
		}
		fmt.Fprintln(t.tw, header)
		t.started = true
	}
	for _, e := range t.pending {
		if e.Error != nil {
			id := e.ID
			if id == "" {
				id = "-"
			}
			fmt.Fprintf(t.tw, "%s\t-\t-\t-\t-\t-\t-\t%s\n", displayText(id), displayText(e.Error.Reason))
			continue
		}
		cwd := e.Cwd
		if cwd == "" {
			cwd = "-"
		}
		fmt.Fprintf(t.tw, "%s%s\t%s\t%s\t%d\t%t\t%s\t%s", strings.Repeat("  ", e.depth), displayText(e.ID), displayText(cwd), formatMillis(e.CreatedAt), e.Size, e.Pending, e.Revision, displayText(orDash(e.ParentSession)))
		if t.damaged {
			fmt.Fprint(t.tw, "\t-")
		}
		fmt.Fprintln(t.tw)
	}
	t.pending = t.pending[:0]
	return t.tw.Flush()
}

// treeOrder returns entries in tree order: each session, then the sessions
// whose parent it is (depth one more), depth first, in listing order. A
// session whose parent is not listed (or a damaged entry) is at the top
// level; a parent cycle, which no top-level session reaches, comes after
// the others, from its first member in listing order. Each entry is
// listed once.
func treeOrder(entries []listEntry) []listEntry {
	listed := map[string]bool{}
	for _, e := range entries {
		if e.Error == nil && e.ID != "" {
			listed[e.ID] = true
		}
	}
	children := map[string][]int{}
	var roots []int
	for i, e := range entries {
		if e.Error == nil && e.ParentSession != "" && e.ParentSession != e.ID && listed[e.ParentSession] {
			children[e.ParentSession] = append(children[e.ParentSession], i)
			continue
		}
		roots = append(roots, i)
	}
	out := make([]listEntry, 0, len(entries))
	seen := make([]bool, len(entries))
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if seen[i] {
			return
		}
		seen[i] = true
		e := entries[i]
		e.depth = depth
		out = append(out, e)
		for _, c := range children[e.ID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	for i := range entries {
		walk(i, 0)
	}
	return out
}
