package tool

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

const listDirSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory path, relative to the working directory (default: the working directory itself)."}
  },
  "additionalProperties": false
}`

// deniedMark follows the name of a denied entry in list_dir's output.
const deniedMark = " (denied: reserved by the worker)"

type listDirArgs struct {
	Path string `json:"path"`
}

// listDirMeta is list_dir's result Meta.
type listDirMeta struct {
	Path      string `json:"path"`
	Entries   int    `json:"entries"`
	Shown     int    `json:"shown"`
	Truncated bool   `json:"truncated"`
}

func listDirTool(opts BuiltinOptions, deny denyList) Tool {
	return Tool{
		Name: ListDirName,
		Description: "List a directory inside the working directory: one entry per line, sorted, directories ending in '/'; " +
			"entries the worker reserves are marked" + deniedMark + " and cannot be read or written.",
		Schema:     []byte(listDirSchema),
		Parallel:   true,
		Idempotent: true,
		Run: func(ctx context.Context, call Call) (Result, error) {
			var a listDirArgs
			if err := decodeArgs(call, &a); err != nil {
				return Result{}, err
			}
			return listDir(deny, call.Cwd, a, opts.MaxOutputBytes, maxListEntries)
		},
	}
}

func listDir(deny denyList, cwd string, a listDirArgs, maxBytes, maxEntries int) (Result, error) {
	shownPath := a.Path
	if shownPath == "" {
		shownPath = "."
	}
	root, rel, info, err := statInCwd(deny, cwd, a.Path, shownPath)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	if !info.IsDir() {
		return Result{}, fmt.Errorf("%q is not a directory; use read_file to read a file", shownPath)
	}
	d, err := root.Open(rel)
	if err != nil {
		return Result{}, escapeError(shownPath, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return Result{}, fmt.Errorf("listing %q: %w", shownPath, err)
	}
	// Denied entries are listed as such, never entered (D69).
	var snap []denied
	dirReal := ""
	if len(deny.paths) > 0 {
		if dirReal, err = resolveIn(cwd, rel); err != nil {
			return Result{}, err
		}
		snap = deny.snapshot()
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		if snap != nil && checkEntry(snap, dirReal, e.Name(), e.Type()) {
			n += deniedMark
		}
		names = append(names, n)
	}
	slices.Sort(names)

	var out strings.Builder
	shown := 0
	for _, n := range names {
		if shown == maxEntries || out.Len()+len(n)+1 > maxBytes {
			break
		}
		out.WriteString(n)
		out.WriteByte('\n')
		shown++
	}
	truncated := shown < len(names)
	text := out.String()
	switch {
	case len(names) == 0:
		text = "(empty directory)"
	case truncated:
		text += fmt.Sprintf("[truncated: showing %d of %d entries]", shown, len(names))
	default:
		text = strings.TrimSuffix(text, "\n")
	}
	res := TextResult(text)
	res.Meta = meta(listDirMeta{Path: shownPath, Entries: len(names), Shown: shown, Truncated: truncated})
	return res, nil
}
