package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"kaas/cmd/kaas/inspect"
)

func runInspect(args []string) error {
	o := inspect.Options{In: os.Stdin, Out: os.Stdout}
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kaas inspect [flags]\n\n"+
			"A live view of a running broker's actors (partitions, transactional ids,\n"+
			"groups, the fence broadcaster): mailbox depth, messages/s, age of the last\n"+
			"message and a state summary. Keys: ↑/↓ move, enter inspects one actor,\n"+
			"/ filters by name, tab cycles kinds, esc goes back, q quits.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Admin, "admin", "127.0.0.1:9644", "the broker's admin listener (`host:port`, kaas serve --admin)")
	fs.BoolVar(&o.JSON, "json", false, "print one snapshot as JSON and exit")
	fs.BoolVar(&o.Connections, "connections", false, "print the open client connections — listener, remote address, principal, SASL mechanism, TLS version — as JSON and exit")
	fs.StringVar(&o.Actor, "actor", "", "one actor by `name` (kind/name, e.g. partition/orders-0): with --json its detail, else open on it")
	fs.StringVar(&o.Filter, "filter", "", "show actors whose kind/name contains this `text`")
	fs.DurationVar(&o.Refresh, "refresh", time.Second, "how often the live view refreshes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("inspect: unexpected argument %q", fs.Arg(0))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return inspect.Run(ctx, o)
}
