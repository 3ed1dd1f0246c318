package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// Environment variables that supply defaults for the store flags.
const (
	envRoot        = "SESSIONFLOW_ROOT"
	envCompression = "SESSIONFLOW_COMPRESSION"
	envFormat      = "SESSIONFLOW_FORMAT"
)

// cliWorkflowID is the owner workflow id written into leases the CLI takes.
const cliWorkflowID = "cli"

// storeFlags are the persistent flags of the log group.
type storeFlags struct {
	root        string
	compression string
	format      string
}

const logLong = `Offline commands over a session store root.

Every subcommand needs the store root: --root DIR, or the environment variable
` + envRoot + `. The root's encoding is --compression none|zstd, or
` + envCompression + `, else the one its marker (.sessionflow-root) records,
else zstd; one given that the marker contradicts is an error.
--format v3|v0 (or ` + envFormat + `, else v3) is the log format new sessions
are written in: v0 is the format of the published DeepSeek Harness, for a root
shared with it (sessions then stay readable and resumable by the harness, and
its sessions are written in place instead of migrated to v3).

Write access (create, append, repair) takes the session's write lease for the
duration of the command and releases it on exit; it fails with "already owned"
while another handle (a running workflow, another command) holds the lease.`

func newLogCmd(a *app) *cobra.Command {
	sf := &storeFlags{}
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Inspect and maintain session logs offline",
		Long:  logLong,
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	pf := cmd.PersistentFlags()
	sf.addRoot(pf, "store root directory (default $"+envRoot+")")
	pf.StringVar(&sf.format, "format", "", "log format of new sessions: v3, or v0 to share the root with the published DeepSeek Harness (default $"+envFormat+", else v3)")
	cmd.AddCommand(
		newLogListCmd(a, sf),
		newLogCatCmd(a, sf),
		newLogInspectCmd(a, sf),
		newLogCreateCmd(a, sf),
		newLogAppendCmd(a, sf),
		newLogRepairCmd(a, sf),
		newLogMigrateCmd(a, sf),
		newLogUnlockCmd(a, sf),
		newLogDeleteCmd(a, sf),
		newLogDemoCmd(a, sf),
		newLogCheckFSCmd(a, sf),
		newLogCheckFSLockCmd(a),
	)
	return cmd
}

// storeFor checks the session id of a log command, then opens the store.
func (a *app) storeFor(sf *storeFlags, id string) (*jsonl.Store, error) {
	if err := requireID(id); err != nil {
		return nil, err
	}
	return a.openStore(sf)
}

// openStore resolves the store flags (flag, then environment; the
// compression then the root's marker, then zstd: rootCompression) and opens
// the store.
func (a *app) openStore(sf *storeFlags) (*jsonl.Store, error) {
	root, err := a.storeRoot(sf)
	if err != nil {
		return nil, err
	}
	comp, source := sf.compression, "--compression"
	if comp == "" {
		comp, source = a.getenv(envCompression), envCompression
	}
	c, err := rootCompression(root, comp, source)
	if err != nil {
		return nil, err
	}
	format, source := sf.format, "--format"
	if format == "" {
		format, source = a.getenv(envFormat), envFormat
	}
	f, err := jsonl.ParseFormat(format)
	if err != nil {
		return nil, usageErrorf("%s: %w", source, err)
	}
	st, err := jsonl.NewStore(jsonl.Options{
		Root:        root,
		Compression: c,
		Format:      f,
		Logger:      slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", root, err)
	}
	return st, nil
}

// requireID checks the --id flag.
func requireID(id string) error {
	if id == "" {
		return usageErrorf("--id is required")
	}
	return nil
}

// newHandleID returns a fresh write-handle id for this invocation.
func newHandleID() string { return "cli/" + randhex.String(16) }

// newOwner returns the lease owner of this invocation.
func newOwner() jsonl.Owner {
	return jsonl.Owner{WorkflowID: cliWorkflowID, RunID: strconv.Itoa(os.Getpid()) + "-" + randhex.String(4)}
}

// openWrite opens id for write under a fresh CLI handle.
func openWrite(ctx context.Context, st *jsonl.Store, id string) (*jsonl.Handle, error) {
	return st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID(), Owner: newOwner()})
}

// closeHandle closes h and joins a close failure to err.
func closeHandle(ctx context.Context, h *jsonl.Handle, err error) error {
	if cerr := h.Close(ctx); cerr != nil {
		return errors.Join(err, fmt.Errorf("close: %w", cerr))
	}
	return err
}

// formatMillis renders Unix milliseconds as an RFC 3339 UTC time.
func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// describeLease renders a lease on one line.
func describeLease(l *wire.Lease) string {
	if l.Unreadable != "" {
		return "an unreadable lease (" + l.Unreadable + ")"
	}
	return fmt.Sprintf("handle %q, owner workflow %q run %q, host %q pid %d, acquired %s",
		l.HandleID, l.Owner.WorkflowID, l.Owner.RunID, l.Host, l.PID, formatMillis(l.AcquiredAt))
}

// writeJSON writes v as one indented JSON document, keeping '<', '>' and '&'
// as they are.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeLog writes a session's logical log to w as JSONL through a read
// handle: the header line as the store writes it, then one event per line.
// It returns the number of events.
func writeLog(ctx context.Context, w io.Writer, st *jsonl.Store, id string) (int, error) {
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return 0, err
	}
	defer h.Close(ctx)
	events, err := h.Read(ctx, 0, -1)
	if err != nil {
		return 0, err
	}
	line, err := jsonl.EncodeHeaderLine(h.Header())
	if err != nil {
		return 0, err
	}
	out := append([]byte(nil), line...)
	for _, e := range events {
		b, err := e.MarshalJSON()
		if err != nil {
			return 0, fmt.Errorf("encode event %d: %w", e.Seq, err)
		}
		out = append(append(out, b...), '\n')
	}
	_, err = w.Write(out)
	return len(events), err
}

func newLogCatCmd(a *app, sf *storeFlags) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "cat --id ID",
		Short: "Print a session's logical log as JSONL",
		Long: `Print the logical log of a session on stdout: the header line as the store
writes it, then one event per line. A torn tail is not shown; records recovered
from a torn zstd frame are. The log is opened for reading and never modified.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.storeFor(sf, id)
			if err != nil {
				return err
			}
			_, err = writeLog(cmd.Context(), a.stdout, st, id)
			return err
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	return cmd
}

func newLogCreateCmd(a *app, sf *storeFlags) *cobra.Command {
	var id, cwd, parent string
	cmd := &cobra.Command{
		Use:   "create --id ID [--cwd DIR] [--parent ID]",
		Short: "Create an empty session log",
		Long: `Create a session and make it durable as a header-only log (createdAt = now).
The store root is created if missing. --cwd records the session's working directory (a relative path is resolved
against the current directory) and selects its project directory; --parent
records the id of the session it was forked from.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			if cwd != "" {
				abs, err := filepath.Abs(cwd)
				if err != nil {
					return fmt.Errorf("--cwd: %w", err)
				}
				cwd = abs
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(st.Root(), 0o700); err != nil {
				return fmt.Errorf("create the store root: %w", err)
			}
			ctx := cmd.Context()
			hdr := wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: a.now().UnixMilli(), Cwd: cwd, ParentSession: parent}
			h, err := st.Create(ctx, hdr, jsonl.CreateOptions{HandleID: newHandleID(), Owner: newOwner()})
			if err != nil {
				return err
			}
			if err := closeHandle(ctx, h, h.Flush(ctx)); err != nil {
				return err
			}
			snap, err := st.Stat(ctx, id)
			if err != nil {
				return err
			}
			if snap == nil {
				return fmt.Errorf("session %q vanished right after its creation", id)
			}
			_, err = fmt.Fprintf(a.stdout, "created session %q: %s\n", id, snap.Path)
			return err
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the session")
	cmd.Flags().StringVar(&parent, "parent", "", "id of the parent session")
	return cmd
}

func newLogUnlockCmd(a *app, sf *storeFlags) *cobra.Command {
	var id string
	var force bool
	cmd := &cobra.Command{
		Use:   "unlock --id ID --force",
		Short: "Forfeit a session's write lease",
		Long: `Remove a session's write lease without asking its owner, for a lease left
behind by a crashed owner. The lease's handle id is revoked, so the old owner can
never write again; a session that was created but never written is erased.

This command cannot check whether the owning workflow is still running: that
check needs Temporal and belongs to the lifecycle commands. --force is
required and skips it; use it only when the owner is known to be gone.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			if !force {
				return fmt.Errorf("refusing to unlock session %q without --force: an unlock that first checks through Temporal that the owning workflow is not running needs the lifecycle commands; --force skips that check", id)
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			lease, err := st.ForceUnlock(cmd.Context(), id)
			if err != nil {
				return err
			}
			if lease == nil {
				_, err = fmt.Fprintln(a.stdout, "no lease held")
				return err
			}
			fmt.Fprintf(a.stdout, "removed lease of session %q: %s\n", id, describeLease(lease))
			// A lease records the pending header at create and keeps it after
			// the first write, so whether the session was erased is read from
			// the store, not from the lease.
			snap, err := st.Stat(cmd.Context(), id)
			if err != nil {
				return err
			}
			if snap == nil {
				fmt.Fprintf(a.stdout, "session %q was never written; it was erased\n", id)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&force, "force", false, "remove the lease without checking its owner")
	return cmd
}

func newLogDeleteCmd(a *app, sf *storeFlags) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "delete --id ID",
		Short: "Delete a session",
		Long: `Delete a session directory: its log, summary and leftovers. It refuses while a
write lease is held; deleting an unknown id does nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.storeFor(sf, id)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			had, err := st.Has(ctx, id)
			if err != nil {
				return err
			}
			if err := st.Delete(ctx, id); err != nil {
				return err
			}
			if !had {
				_, err = fmt.Fprintf(a.stdout, "session %q not found; nothing deleted\n", id)
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "deleted session %q\n", id)
			return err
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	return cmd
}
