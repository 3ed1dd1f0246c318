package tool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// binarySniffBytes is how much of a file read_file inspects for NUL bytes.
const binarySniffBytes = 8 << 10

const readFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path, relative to the working directory (or absolute inside it)."},
    "offset": {"type": "integer", "minimum": 1, "maximum": 1000000000, "description": "First line to read, 1-based (default 1)."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000000000, "description": "Maximum number of lines to read (default: up to the output cap)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

type readFileArgs struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Limit  int64  `json:"limit"`
}

// readFileMeta is read_file's result Meta.
type readFileMeta struct {
	Path      string `json:"path"`
	StartLine int64  `json:"startLine"`
	EndLine   int64  `json:"endLine"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
}

func readFileTool(opts BuiltinOptions, deny denyList) Tool {
	return Tool{
		Name: ReadFileName,
		Description: "Read a UTF-8 text file inside the working directory. Optional offset (1-based line) and limit (lines) " +
			fmt.Sprintf("select a range; output is capped at %d bytes.", opts.MaxOutputBytes),
		Schema:     []byte(readFileSchema),
		Parallel:   true,
		Idempotent: true,
		Run: func(ctx context.Context, call Call) (Result, error) {
			var a readFileArgs
			if err := decodeArgs(call, &a); err != nil {
				return Result{}, err
			}
			return readFile(deny, call.Cwd, a, opts.MaxOutputBytes)
		},
	}
}

func readFile(deny denyList, cwd string, a readFileArgs, maxBytes int) (Result, error) {
	root, rel, info, err := statInCwd(deny, cwd, a.Path, a.Path)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	if info.IsDir() {
		return Result{}, fmt.Errorf("%q is a directory, not a file; use list_dir to see its entries", a.Path)
	}
	if !info.Mode().IsRegular() {
		return Result{}, fmt.Errorf("%q is not a regular file (%s)", a.Path, info.Mode().Type())
	}
	f, err := root.Open(rel)
	if err != nil {
		return Result{}, escapeError(a.Path, err)
	}
	defer f.Close()

	br := bufio.NewReaderSize(f, 64<<10)
	head, err := br.Peek(binarySniffBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return Result{}, fmt.Errorf("reading %q: %w", a.Path, err)
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return Result{}, fmt.Errorf("%q looks like a binary file (it contains NUL bytes); read_file only reads text", a.Path)
	}

	start := max(a.Offset, 1)
	var out strings.Builder
	line := int64(0)
	end := start - 1
	truncated, cut := false, false
	for {
		text, err := readLine(br, maxBytes+1)
		if text != "" {
			line++
			if line >= start {
				if a.Limit > 0 && line >= start+a.Limit {
					truncated = true
					break
				}
				if out.Len()+len(text) > maxBytes {
					// Keep whole lines; a first line longer than the cap is cut.
					if out.Len() == 0 {
						out.WriteString(validPrefix(text, maxBytes))
						end = line
						cut = true
					}
					truncated = true
					break
				}
				out.WriteString(text)
				end = line
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return Result{}, fmt.Errorf("reading %q: %w", a.Path, err)
		}
	}
	if start > 1 && line < start {
		return Result{}, fmt.Errorf("offset %d is past the end of %q (%d lines)", start, a.Path, line)
	}
	content := strings.ToValidUTF8(out.String(), "\uFFFD")
	switch {
	case cut:
		content += fmt.Sprintf("\n[truncated: line %d is longer than the %d-byte output cap; only its start is shown]", end, maxBytes)
	case truncated:
		if !strings.HasSuffix(content, "\n") && content != "" {
			content += "\n"
		}
		content += fmt.Sprintf("[truncated: showing lines %d-%d; continue with offset %d]", start, end, end+1)
	case content == "" && line == 0:
		content = "(empty file)"
	}
	res := TextResult(content)
	res.Meta = meta(readFileMeta{Path: a.Path, StartLine: start, EndLine: end, Bytes: out.Len(), Truncated: truncated})
	return res, nil
}

// readLine reads one line (with its newline) keeping at most keep bytes
// of it; the rest of a longer line is read and dropped.
func readLine(br *bufio.Reader, keep int) (string, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return string(buf), err
	}
}

// validPrefix returns at most n bytes of s, cut at a rune boundary.
func validPrefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
