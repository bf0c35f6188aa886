// Command server runs flashstep: the pages, the API and the trace streams.
//
//	server [-addr :8080]
//
// Without a GPU the traces come from the CPU mirror of each kernel.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"flashstep/runner"
	"flashstep/static"
	"flashstep/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "flashstep:", err)
		os.Exit(1)
	}
}

// run starts the server and serves until ctx is done, then shuts down
// gracefully: open websockets get close 1001, requests in flight finish. If
// ready is not nil it receives the listening address, for tests.
func run(ctx context.Context, args []string, stdout io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	addr := fs.String("addr", "localhost:8080", "address to listen on")
	verbose := fs.Bool("v", false, "log every request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: level}))

	eng := runner.Mirror{}
	app := web.NewServer(eng, static.Files, log)
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(app.CloseStreams)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("flashstep listening", "url", "http://"+ln.Addr().String(), "engine", eng.Engine().Name)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
