package tool

import (
	"errors"
	"fmt"

	"github.com/sessionflow/sessionflow/provider"
)

// CodeAborted is the code of a result whose call was cancelled: the call's
// context was done before the tool ran, or the tool returned the context's
// error.
const CodeAborted = "ABORTED"

// Error names of the results the registry itself produces (ErrorInfo.Name).
const (
	NameNotFound         = "ToolNotFoundError"
	NameInvalidArguments = "InvalidArgumentsError"
	NameOutsideCwd       = "OutsideCwdError"
	NameFailed           = "ToolFailedError"
	NameAborted          = "AbortError"
)

// ErrOutsideCwd marks a path that leaves the call's working directory, or a
// call that has no working directory to be confined to. A Run error that
// wraps it becomes an OUTSIDE_CWD result.
var ErrOutsideCwd = errors.New("outside the working directory")

// Errors Register returns; match them with errors.Is.
var (
	// ErrInvalidName: the name is empty or does not match ^[a-zA-Z0-9_-]{1,64}$.
	ErrInvalidName = errors.New("tool: invalid name")
	// ErrDuplicate: a tool of that name is already registered.
	ErrDuplicate = errors.New("tool: duplicate name")
	// ErrNoRun: the tool has no Run function.
	ErrNoRun = errors.New("tool: no Run function")
	// ErrInvalidSchema: the schema is missing, is not valid JSON Schema, or
	// its root is not of type object.
	ErrInvalidSchema = errors.New("tool: invalid schema")
)

// TextResult returns a successful result holding one text block.
func TextResult(text string) Result {
	return Result{Content: []provider.Block{{Type: provider.BlockText, Text: text}}}
}

// ErrorResult returns an IsError result holding one text block and the
// error's name and code.
func ErrorResult(name, code, text string) Result {
	return Result{
		Content: []provider.Block{{Type: provider.BlockText, Text: text}},
		IsError: true,
		Error:   &ErrorInfo{Name: name, Code: code},
	}
}

// errorResultf is ErrorResult with a formatted text prefixed by "Error: ".
func errorResultf(name, code, format string, args ...any) Result {
	return ErrorResult(name, code, "Error: "+fmt.Sprintf(format, args...))
}
