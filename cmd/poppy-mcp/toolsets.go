package main

// This file reads serve's choice of tools (docs/tools.md "Toolsets and
// read-only"): --read-only (POPPY_READ_ONLY) and --toolsets LIST
// (POPPY_TOOLSETS). Which tool is in which group, and which writes, is
// package tools' table; serve only reads the flags and passes them on in
// tools.Options.

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/tools"
)

// toolChoice is serve's --read-only and --toolsets, read and checked.
type toolChoice struct {
	readOnly    bool
	readOnlyEnv string // POPPY_READ_ONLY as given, checked by check
	list        string // --toolsets as given
	toolsets    tools.Toolsets
}

// register registers --read-only and --toolsets on fs, their defaults from
// the environment.
func (tc *toolChoice) register(fs *flag.FlagSet) {
	tc.readOnlyEnv = os.Getenv("POPPY_READ_ONLY")
	on, _ := strconv.ParseBool(tc.readOnlyEnv) // a bad value is check's error
	fs.BoolVar(&tc.readOnly, "read-only", on, "serve no tool that writes at a Company: no messages sent, no relayed MCP tools, "+
		"API operations GET and HEAD only (or POPPY_READ_ONLY=1)")
	fs.StringVar(&tc.list, "toolsets", os.Getenv("POPPY_TOOLSETS"), "serve only the tool groups in `LIST`, comma-separated: "+
		strings.Join(tools.ToolGroups(), ", ")+" (discovery is always on; or POPPY_TOOLSETS; default all)")
}

// check reads the list of groups; an unknown group, or a POPPY_READ_ONLY
// that is not a boolean, is a start-up error that says what to give.
func (tc *toolChoice) check() error {
	if _, err := strconv.ParseBool(tc.readOnlyEnv); tc.readOnlyEnv != "" && err != nil {
		return fmt.Errorf("POPPY_READ_ONLY=%q: want 1 or 0 (true or false)", tc.readOnlyEnv)
	}
	ts, err := tools.ParseToolsets(tc.list)
	if err != nil {
		return fmt.Errorf("--toolsets (or POPPY_TOOLSETS) %q: %w", tc.list, err)
	}
	tc.toolsets = ts
	return nil
}

// log says at start which tools are served, when not every one is.
func (tc *toolChoice) log(logger *slog.Logger) {
	if tc.readOnly || tc.toolsets.String() != "all" {
		logger.Info("serving some tools only", "read_only", tc.readOnly, "toolsets", tc.toolsets.String())
	}
}
