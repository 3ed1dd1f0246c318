package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func TestListEmptyAndMissingRoot(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "absent")
			empty := t.TempDir()
			for _, root := range []string{missing, empty} {
				r := mustOK(t, logCmd(t, root, comp, "", "list"))
				require.Equal(t, fmt.Sprintf("no sessions under %s\n", root), r.stdout)
				r = mustOK(t, logCmd(t, root, comp, "", "list", "--json"))
				require.Equal(t, "", r.stdout)
			}
			_, err := os.Stat(missing)
			require.ErrorIs(t, err, os.ErrNotExist, "list must not create the root")
		})
	}
}

func TestCreateListCat(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "nested", "root")
			cwd := t.TempDir()
			before := time.Now().UnixMilli()
			r := mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s1", "--cwd", cwd, "--parent", "p0"))
			after := time.Now().UnixMilli()
			require.True(t, strings.HasPrefix(r.stdout, `created session "s1": `+root+string(filepath.Separator)), r.stdout)
			logFile := strings.TrimSpace(strings.TrimPrefix(r.stdout, `created session "s1": `))
			require.FileExists(t, logFile)
			require.Nil(t, leaseOf(t, root, comp, "s1"), "create must release its lease")

			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s2"))

			r = mustOK(t, logCmd(t, root, comp, "", "list", "--json"))
			entries := jsonLines[map[string]any](t, r.stdout)
			require.Len(t, entries, 2)
			s1 := entries[0]
			require.Equal(t, "s1", s1["id"])
			require.Equal(t, cwd, s1["cwd"])
			require.Equal(t, "p0", s1["parentSession"])
			require.Equal(t, false, s1["pending"])
			require.Equal(t, logFile, s1["path"])
			createdAt := int64(s1["createdAt"].(float64))
			require.True(t, createdAt >= before && createdAt <= after, "createdAt %d not in [%d, %d]", createdAt, before, after)
			fi, err := os.Stat(logFile)
			require.NoError(t, err)
			require.Equal(t, float64(fi.Size()), s1["size"])
			require.NotEmpty(t, s1["revision"])
			require.Equal(t, "s2", entries[1]["id"])
			require.Equal(t, "", entries[1]["cwd"])

			r = mustOK(t, logCmd(t, root, comp, "", "list"))
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			require.Len(t, lines, 3)
			require.Regexp(t, `^ID +CWD +CREATED +SIZE +PENDING +REVISION +PARENT$`, lines[0])
			require.Regexp(t, `^s1 +`+regexp.QuoteMeta(cwd)+` +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z +`+fmt.Sprint(fi.Size())+` +false +\S+ +p0$`, lines[1])
			require.Regexp(t, `^s2 +- +`, lines[2])
			require.Equal(t, strings.Index(lines[0], "CWD"), strings.Index(lines[1], cwd), "columns are aligned")

			cat := catLines(t, root, comp, "s1")
			want := fmt.Sprintf(`{"type":"session","version":3,"id":"s1","createdAt":%d,"cwd":%q,"parentSession":"p0","isSeeded":false,"delegationDepth":0}`, createdAt, cwd)
			require.Equal(t, []string{want}, cat)
			require.Equal(t, []string{fmt.Sprintf(`{"type":"session","version":3,"id":"s2","createdAt":%d,"isSeeded":false,"delegationDepth":0}`,
				int64(entries[1]["createdAt"].(float64)))}, catLines(t, root, comp, "s2"))
			if comp == "none" {
				require.Equal(t, want+"\n", string(readFile(t, logFile)), "a raw header-only log is exactly the header line")
			}

			mustFail(t, logCmd(t, root, comp, "", "create", "--id", "s1"), 1, `session "s1" already exists`)
			mustFail(t, logCmd(t, root, comp, "", "cat", "--id", "nope"), 1, `session "nope" not found`)
		})
	}
}

func TestCreateResolvesRelativeCwd(t *testing.T) {
	root := t.TempDir()
	wd, err := os.Getwd()
	require.NoError(t, err)
	mustOK(t, logCmd(t, root, "none", "", "create", "--id", "rel", "--cwd", "."))
	r := mustOK(t, logCmd(t, root, "none", "", "inspect", "--id", "rel", "--json"))
	var rep struct {
		Header wire.Header `json:"header"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, wd, rep.Header.Cwd)
}

func TestUnlockForce(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s"))

			// A write handle left open by an owner that went away.
			st := newTestStore(t, root, comp)
			h, err := st.Open(ctx, "s", jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "wf/left-open", Owner: jsonl.Owner{WorkflowID: "session/s", RunID: "run-1"}})
			require.NoError(t, err)

			appendLine := jsonlOf(t, ev(t, wire.TypeTurnStart, 0, 1, `{"turn":1}`))
			mustFail(t, logCmd(t, root, comp, appendLine, "append", "--id", "s"), 1, `session "s" is already owned by an active write handle`)
			mustFail(t, logCmd(t, root, comp, "", "repair", "--id", "s"), 1, "already owned")
			mustFail(t, logCmd(t, root, comp, "", "delete", "--id", "s"), 1, "already owned")

			r := mustOK(t, logCmd(t, root, comp, "", "inspect", "--id", "s"))
			require.Regexp(t, `(?m)^lease: +handle "wf/left-open", owner workflow "session/s" run "run-1", host ".*" pid \d+, acquired \S+$`, r.stdout)

			r = logCmd(t, root, comp, "", "unlock", "--id", "s")
			mustFail(t, r, 1, "without --force")
			require.Contains(t, r.stderr, "Temporal")
			require.NotNil(t, leaseOf(t, root, comp, "s"), "a refused unlock keeps the lease")

			r = mustOK(t, logCmd(t, root, comp, "", "unlock", "--id", "s", "--force"))
			require.Regexp(t, `^removed lease of session "s": handle "wf/left-open", owner workflow "session/s" run "run-1", host ".*" pid \d+, acquired \S+\n$`, r.stdout)
			require.Nil(t, leaseOf(t, root, comp, "s"))

			// The forfeited handle can never write again.
			err = h.Append(ctx, []session.Event{ev(t, wire.TypeTurnStart, 0, 1, `{"turn":1}`)})
			require.Error(t, err)

			require.Equal(t, "no lease held\n", mustOK(t, logCmd(t, root, comp, "", "unlock", "--id", "s", "--force")).stdout)
			require.Equal(t, "no lease held\n", mustOK(t, logCmd(t, root, comp, "", "unlock", "--id", "unknown", "--force")).stdout)
			mustOK(t, logCmd(t, root, comp, appendLine, "append", "--id", "s"))
			require.Len(t, catLines(t, root, comp, "s"), 2)
		})
	}
}

func TestUnlockForcePendingSessionErasesIt(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			st := newTestStore(t, root, comp)
			_, err := st.Create(context.Background(), wire.Header{ID: "p", CreatedAt: 5},
				jsonl.CreateOptions{HandleID: "wf/pending", Owner: jsonl.Owner{WorkflowID: "session/p", RunID: "r"}})
			require.NoError(t, err)

			r := mustOK(t, logCmd(t, root, comp, "", "list", "--json"))
			require.Contains(t, r.stdout, `"pending":true`)
			r = mustOK(t, logCmd(t, root, comp, "", "inspect", "--id", "p"))
			require.Contains(t, r.stdout, "(pending: created, never written)")
			require.Equal(t, []string{`{"type":"session","version":3,"id":"p","createdAt":5,"isSeeded":false,"delegationDepth":0}`}, catLines(t, root, comp, "p"))

			r = mustOK(t, logCmd(t, root, comp, "", "unlock", "--id", "p", "--force"))
			require.Contains(t, r.stdout, `removed lease of session "p": handle "wf/pending"`)
			require.Contains(t, r.stdout, `session "p" was never written; it was erased`)
			require.Equal(t, "", mustOK(t, logCmd(t, root, comp, "", "list", "--json")).stdout)
		})
	}
}

func TestDelete(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "d"))
			path := logPath(t, root, comp, "d")
			require.FileExists(t, path)

			require.Equal(t, "deleted session \"d\"\n", mustOK(t, logCmd(t, root, comp, "", "delete", "--id", "d")).stdout)
			require.NoDirExists(t, filepath.Dir(path))
			require.Equal(t, "", mustOK(t, logCmd(t, root, comp, "", "list", "--json")).stdout)
			require.Equal(t, "session \"d\" not found; nothing deleted\n", mustOK(t, logCmd(t, root, comp, "", "delete", "--id", "d")).stdout)
		})
	}
}

func TestTraversalIDStaysUnderRoot(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			parent := t.TempDir()
			root := filepath.Join(parent, "root")
			for _, id := range []string{"../x", "..", "a/../../b"} {
				r := mustOK(t, logCmd(t, root, comp, "", "create", "--id", id))
				path := strings.TrimSpace(strings.TrimPrefix(r.stdout, fmt.Sprintf("created session %q: ", id)))
				rel, err := filepath.Rel(root, path)
				require.NoError(t, err)
				require.False(t, strings.HasPrefix(rel, ".."), "log %s escapes the root", path)
				require.Equal(t, logPath(t, root, comp, id), path)
				require.Equal(t, 1, len(catLines(t, root, comp, id)))
			}
			entries, err := os.ReadDir(parent)
			require.NoError(t, err)
			require.Len(t, entries, 1, "nothing may be written beside the root")
			require.Equal(t, "root", entries[0].Name())

			r := mustOK(t, logCmd(t, root, comp, "", "list", "--json"))
			listed := jsonLines[struct {
				ID string `json:"id"`
			}](t, r.stdout)
			require.Len(t, listed, 3)
			// Rows come in the order of their directories: "..~002Fx",
			// "a~002F..~002F..~002Fb", "~002E~002E".
			require.Equal(t, []string{"../x", "a/../../b", ".."}, []string{listed[0].ID, listed[1].ID, listed[2].ID})

			mustOK(t, logCmd(t, root, comp, "", "delete", "--id", "../x"))
			require.NoFileExists(t, logPath(t, root, comp, "../x"))
			require.FileExists(t, logPath(t, root, comp, ".."))
		})
	}
}

func TestUsageErrors(t *testing.T) {
	root := t.TempDir()
	t.Setenv(envRoot, "")
	t.Setenv(envCompression, "")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, `"starter" needs a subcommand`},
		{"unknown command", []string{"bogus"}, `unknown command "bogus" for "starter"`},
		{"log alone", []string{"log"}, `"starter log" needs a subcommand`},
		{"unknown log command", []string{"log", "bogus"}, `unknown command "bogus" for "starter log"`},
		{"unknown flag", []string{"log", "list", "--root", root, "--bogus"}, "unknown flag: --bogus"},
		{"positional argument", []string{"log", "cat", "--root", root, "x"}, `unexpected argument "x"`},
		{"missing root", []string{"log", "list"}, "the store root is required"},
		{"missing id", []string{"log", "cat", "--root", root}, "--id is required"},
		{"bad compression", []string{"log", "list", "--root", root, "--compression", "gzip"}, `--compression: unknown compression "gzip"`},
		{"bad batch", []string{"log", "append", "--root", root, "--id", "x", "--batch", "0"}, "--batch must be at least 1"},
		{"batch not a number", []string{"log", "append", "--root", root, "--id", "x", "--batch", "many"}, `invalid argument "many"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, "", c.args...)
			mustFail(t, r, 1, c.want)
			require.Regexp(t, `\nRun 'starter( log( \w+)?)? --help' for usage\.\n$`, r.stderr)
			require.Empty(t, r.stdout)
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	r := mustOK(t, runCLI(t, "", "--help"))
	require.Contains(t, r.stdout, "Exit status: 0 on success, 1 on any error")
	require.Contains(t, r.stdout, "including a usage error")
	r = mustOK(t, runCLI(t, "", "log", "repair", "--help"))
	require.Contains(t, r.stdout, "nothing to repair")
	require.Contains(t, r.stdout, "--root string")
}

func TestEnvironmentDefaults(t *testing.T) {
	root := t.TempDir()
	t.Setenv(envRoot, root)
	t.Setenv(envCompression, "none")
	mustOK(t, runCLI(t, "", "log", "create", "--id", "e"))
	require.FileExists(t, logPath(t, root, "none", "e"))

	// The environment's compression is the root's, and its marker says so:
	// asking for zstd through the flag contradicts the marker and is
	// refused.
	mustFail(t, runCLI(t, "", "log", "list", "--compression", "zstd"), 1,
		`--compression is "zstd", but store root "`+root+`" is marked for compression "none"`)

	t.Setenv(envCompression, "lz4")
	mustFail(t, runCLI(t, "", "log", "list"), 1, envCompression+`: unknown compression "lz4"`)

	// The flag wins over the environment.
	other := t.TempDir()
	t.Setenv(envCompression, "")
	mustOK(t, runCLI(t, "", "log", "create", "--root", other, "--id", "f"))
	require.FileExists(t, logPath(t, other, "zstd", "f"))
	require.NoFileExists(t, logPath(t, root, "zstd", "f"))
}

// A lease taken by Create keeps its pending header after the first write; a
// forced unlock of such a session must not report it erased.
func TestUnlockForceWrittenCreatedSessionKeepsIt(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			ctx := context.Background()
			st := newTestStore(t, root, comp)
			h, err := st.Create(ctx, wire.Header{ID: "w", CreatedAt: 5},
				jsonl.CreateOptions{HandleID: "wf/created", Owner: jsonl.Owner{WorkflowID: "session/w", RunID: "r"}})
			require.NoError(t, err)
			require.NoError(t, h.Append(ctx, []session.Event{ev(t, wire.TypeTurnStart, 0, 1, `{"turn":1}`)}))

			r := mustOK(t, logCmd(t, root, comp, "", "unlock", "--id", "w", "--force"))
			require.Contains(t, r.stdout, `removed lease of session "w": handle "wf/created"`)
			require.NotContains(t, r.stdout, "erased")
			require.Len(t, catLines(t, root, comp, "w"), 2)
		})
	}
}

// `log list --tree` prints each session under its parent; an orphan (its
// parent not in the root) is at the top level, a parent cycle after the
// others, each session once.
func TestLogListTree(t *testing.T) {
	root := t.TempDir()
	for _, c := range [][]string{{"p", ""}, {"q", "gone"}, {"f", "p"}, {"g", "f"}, {"h", "p"}, {"x", "y"}, {"y", "x"}} {
		args := []string{"create", "--id", c[0]}
		if c[1] != "" {
			args = append(args, "--parent", c[1])
		}
		mustOK(t, logCmd(t, root, "none", "", args[0], args[1:]...))
	}
	r := mustOK(t, logCmd(t, root, "none", "", "list", "--tree"))
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Regexp(t, `^ID +CWD +CREATED +SIZE +PENDING +REVISION +PARENT$`, lines[0])
	var got []string
	for _, l := range lines[1:] {
		id, rest, _ := strings.Cut(strings.TrimLeft(l, " "), " ")
		fields := strings.Fields(rest)
		got = append(got, strings.Repeat(".", len(l)-len(strings.TrimLeft(l, " ")))+id+"<"+fields[len(fields)-1])
	}
	require.Len(t, got, 7)
	at := map[string]int{}
	for i, g := range got {
		at[strings.TrimLeft(strings.Split(g, "<")[0], ".")] = i
	}
	require.Equal(t, "p<-", got[at["p"]])
	require.Equal(t, "..f<p", got[at["p"]+1], "f follows its parent, indented")
	require.Equal(t, "....g<f", got[at["p"]+2])
	require.Equal(t, "..h<p", got[at["p"]+3])
	require.Equal(t, "q<gone", got[at["q"]], "an orphan is at the top level")
	first, second := min(at["x"], at["y"]), max(at["x"], at["y"])
	require.Equal(t, first+1, second, "a cycle is listed once, after the others: its first member, the other under it")
	require.Equal(t, 5, first)
	require.NotContains(t, got[first], ".")
	require.True(t, strings.HasPrefix(got[second], ".."), got[second])
	mustFail(t, logCmd(t, root, "none", "", "list", "--tree", "--json"), 1, "--tree takes no --json, --limit or --cursor")
}
