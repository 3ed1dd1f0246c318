package tool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sessionflow/sessionflow/tool/sandbox"
)

var writeFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path, relative to the working directory (or absolute inside it). Missing parent directories are created."},
    "content": {"type": "string", "description": "The file's complete new content."},
    ` + escalationProperties + `
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// writeFileMeta is write_file's result Meta.
type writeFileMeta struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
}

func writeFileTool(opts BuiltinOptions, deny denyList) Tool {
	return Tool{
		Name: WriteFileName,
		Description: "Write a file inside the working directory, replacing it atomically if it exists; " +
			"missing parent directories are created. Refused in the read-only sandbox mode.",
		Schema:     []byte(writeFileSchema),
		Parallel:   false,
		Idempotent: true,
		Approval:   true,
		Escalates:  true,
		Run: func(ctx context.Context, call Call) (Result, error) {
			var a writeFileArgs
			if err := decodeArgs(call, &a); err != nil {
				return Result{}, err
			}
			mode, err := opts.sandboxMode(call)
			if err != nil {
				return Result{}, err
			}
			if mode == sandbox.ReadOnly {
				return errorResultf(NameSandboxDenied, CodeSandboxDenied, "cannot write %q: file access denied under read-only mode", a.Path), nil
			}
			return writeFile(deny, call.Cwd, a)
		},
	}
}

// writeFile writes a.Content to a temporary file beside the target, syncs
// it, renames it over the target and syncs the directory, all inside the
// root, so the target holds the old or the new content, never a mix.
func writeFile(deny denyList, cwd string, a writeFileArgs) (Result, error) {
	rel, err := localPath(cwd, a.Path)
	if err != nil {
		return Result{}, err
	}
	if err := deny.check(cwd, rel, a.Path); err != nil {
		return Result{}, err
	}
	if filepath.Clean(rel) == "." {
		return Result{}, fmt.Errorf("%q is the working directory itself, not a file path", a.Path)
	}
	root, err := openCwd(cwd)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	dir, base := filepath.Split(filepath.Clean(rel))
	if dir == "" {
		dir = "."
	}
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return Result{}, escapeError(a.Path, fmt.Errorf("creating the parent directories: %w", err))
	}
	perm := fs.FileMode(0o644)
	created := true
	switch info, err := root.Stat(rel); {
	case err == nil && info.IsDir():
		return Result{}, fmt.Errorf("%q is a directory; write_file writes files", a.Path)
	case err == nil:
		perm, created = info.Mode().Perm(), false
	case !errors.Is(err, fs.ErrNotExist):
		return Result{}, escapeError(a.Path, err)
	}

	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(suffix[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return Result{}, escapeError(a.Path, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = root.Remove(tmp)
		}
	}()
	if _, err := f.WriteString(a.Content); err != nil {
		f.Close()
		return Result{}, fmt.Errorf("writing %q: %w", a.Path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return Result{}, fmt.Errorf("syncing %q: %w", a.Path, err)
	}
	if err := f.Close(); err != nil {
		return Result{}, fmt.Errorf("closing %q: %w", a.Path, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		return Result{}, escapeError(a.Path, err)
	}
	committed = true
	if d, err := root.Open(dir); err == nil {
		syncErr := d.Sync()
		d.Close()
		if syncErr != nil {
			return Result{}, fmt.Errorf("syncing the directory of %q: %w", a.Path, syncErr)
		}
	} else {
		return Result{}, fmt.Errorf("opening the directory of %q: %w", a.Path, err)
	}
	verb := "Updated"
	if created {
		verb = "Created"
	}
	res := TextResult(fmt.Sprintf("%s %s (%d bytes)", verb, a.Path, len(a.Content)))
	res.Meta = meta(writeFileMeta{Path: a.Path, Bytes: len(a.Content), Created: created})
	return res, nil
}
