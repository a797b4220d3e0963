// Command bidbench is bidgate's load-test harness.
//
//	bidbench flash-sale   the design's scale: many cold auctions, a few hot ones ending under load,
//	                      watched by WebSocket viewers and pollers (--viewers, --pollers),
//	                      bidders listening on /ws/me (--inboxes)
//	bidbench hot-max      ramp one hot auction until p99 > 200 ms or errors
//	bidbench cold-max     the same for one cold auction
//	bidbench close-burst  many auctions ending in the same second
//	bidbench limits       the stores' own limits only
//	bidbench reads        GET of a cold and of a hot auction against the HTTP floor
//	bidbench browse       list, search, history and "me" reads over a seeded volume
//
// Every scenario ends with an audit of the design's invariants; bidbench
// exits 1 when a check fails. Only loopback targets are accepted.
//
// bidbench mints its own bearer tokens (a bid token per bidder, a sell
// token per seller) with the private key the nodes trust: --key, by default
// the dev cluster's .bidgate/dev-key.pem, so run it from the checkout's root
// against `bidgate dev` (make run).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"bidgate/bench"
	"bidgate/internal/settings"
)

const usage = `usage: bidbench <scenario> [flags]

scenarios:
  flash-sale   N cold auctions with a trickle of bids and H hot ones taking R bids/s each
               over their last minute, ending (and extended by anti-sniping) inside the run;
               --viewers (WebSocket) and --pollers (GET) watch the hot auctions;
               --inboxes bidders listen for their notices on /ws/me
  hot-max      ramp one hot auction's arrival rate until a step's p99 crosses --p99 or errors appear
  cold-max     the same for one cold auction (run bidgate with --promote-rate=-1)
  close-burst  M auctions ending in the same second: time until all are CLOSED, each exactly once
  limits       only the stores' own limits: bidgate's Redis script and PostgreSQL statement from Go
  reads        GET /auctions/{id} of a cold and of a hot auction, and of a do-nothing fasthttp server
               (the HTTP floor), on the same open-loop generator: server CPU per answer against the floor's
  browse       seeds auctions and bids with SQL, then reads them at a fixed rate: list, search, bid
               history, my bids, my auctions; p50/p99 per kind and PostgreSQL's CPU per request

Run "bidbench <scenario> -h" for its flags. Results go to bench-results/ (JSON, HTML, records).
bidbench signs its bearer tokens with --key (default .bidgate/dev-key.pem, the key bidgate dev
creates and trusts): run it from the checkout's root, or give --key, --jwt-issuer, --jwt-audience.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	scenario, args := os.Args[1], os.Args[2:]
	settings.TuneGC() // the generator and the floor, as bidgate's nodes
	switch scenario {
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	case bench.FloorCommand: // the floor server of reads and --floor, a child process, not for users
		os.Exit(bench.FloorMain(args, os.Stdin, os.Stdout, os.Stderr))
	case "flash-sale", "hot-max", "cold-max", "close-burst", "limits", "reads", "browse":
	default:
		fmt.Fprintf(os.Stderr, "bidbench: unknown scenario %q\n\n%s", scenario, usage)
		os.Exit(2)
	}
	inv, err := parse(scenario, args)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bidbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(inv.run(ctx))
}

// play runs a scenario on a connected harness.
type play func(ctx context.Context, e *bench.Env) (*bench.Result, error)

// invocation is one run of bidbench as its command line asks for it.
type invocation struct {
	scenario   string
	opt        bench.Options
	postgres   settings.Postgres
	redis      settings.Redis
	signing    settings.Signing
	play       play
	out        string
	records    bool
	quiet      bool
	cpuProfile string
	compare    compare
}

// compare is --compare-nodes: the scenario on clusters bidbench starts.
type compare struct {
	nodes    string // cluster sizes, comma-separated; "" runs on --targets
	bidgate  string // the bidgate binary
	basePort int
}

// parse reads the flags (and the environment) of a scenario.
func parse(scenario string, args []string) (*invocation, error) {
	fs := settings.NewFlagSet("bidbench " + scenario)
	inv := &invocation{scenario: scenario, opt: bench.DefaultOptions()}
	inv.registerTargets(fs)
	inv.registerStores(fs)
	inv.registerLoad(fs)
	inv.registerOutput(fs)
	switch scenario {
	case "flash-sale":
		inv.play = registerFlashSale(fs)
	case "hot-max", "cold-max":
		inv.play = registerRamp(fs, scenario)
	case "close-burst":
		inv.opt.Limits = false
		inv.play = registerCloseBurst(fs)
	case "limits":
		inv.opt.Limits, inv.opt.SkipReady = true, true
		inv.play = func(ctx context.Context, e *bench.Env) (*bench.Result, error) { return e.LimitsRun(ctx) }
	case "reads":
		inv.opt.Limits = false
		inv.play = registerReads(fs)
	case "browse":
		inv.opt.Limits = false
		inv.play = registerBrowse(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	inv.opt.PostgresURL, inv.opt.RedisAddrs, inv.opt.RedisPassword = inv.postgres.URL, inv.redis.Addrs, inv.redis.Password
	inv.opt.KeyFile, inv.opt.Issuer, inv.opt.Audience = inv.signing.KeyFile, inv.signing.Issuer, inv.signing.Audience
	inv.opt.Stderr = os.Stderr
	inv.opt.Progress = !inv.quiet && term.IsTerminal(int(os.Stderr.Fd()))
	return inv, nil
}

// registerTargets adds the nodes under load and their metrics endpoints.
func (inv *invocation) registerTargets(fs *settings.FlagSet) {
	opt := &inv.opt
	if inv.scenario != "limits" {
		fs.StringVar(&opt.Targets, "targets", opt.Targets, "bidgate node base URLs, comma-separated (loopback only), e.g. http://127.0.0.1:8080,http://127.0.0.1:8081")
	}
	switch inv.scenario {
	case "flash-sale", "hot-max", "cold-max":
		fs.StringVar(&inv.compare.nodes, "compare-nodes", "", "run the scenario once per cluster size given (e.g. 1,3) on a bidgate dev cluster bidbench starts and stops itself "+
			"(on --postgres-url and --redis-addrs, trusting --key), instead of on --targets, and print the runs side by side: CPU per decided bid for bidgate and Redis, rates, latency")
		fs.StringVar(&inv.compare.bidgate, "bidgate", "bidgate", "--compare-nodes: the bidgate binary (a path, or a name looked up in PATH)")
		fs.IntVar(&inv.compare.basePort, "compare-base-port", 18080, "--compare-nodes: the clusters' base port (bidgate dev --base-port; the broker on base+400): below the kernel's ephemeral range, which a client's source port may take")
	}
	switch inv.scenario {
	case "flash-sale", "hot-max", "cold-max", "close-burst", "reads", "browse":
		fs.StringVar(&opt.Metrics, "metrics", "", "the nodes' Prometheus endpoints, comma-separated (loopback only), read for process_cpu_seconds_total "+
			"at the start and end of each step; \"off\" measures none (default: each target's admin port, its port + 300 as bidgate dev lays them out, "+
			"and the same for every member its /cluster/members lists)")
	default:
		opt.Metrics = "off" // no CPU is reported
	}
}

// registerStores adds bidgate's PostgreSQL and Redis (loopback only) and,
// for a scenario that sends requests, the key its tokens are signed with;
// the limits send none.
func (inv *invocation) registerStores(fs *settings.FlagSet) {
	inv.postgres.RegisterURL(fs)
	inv.redis.RegisterAddrs(fs)
	inv.redis.RegisterPassword(fs)
	if inv.scenario != "limits" {
		inv.signing.Register(fs, settings.SigningFlags{Key: "key", Issuer: "jwt-issuer", Audience: "jwt-audience"})
	}
}

// registerLoad adds how the load is sent and how the stores' limits are
// measured.
func (inv *invocation) registerLoad(fs *settings.FlagSet) {
	opt := &inv.opt
	if inv.scenario != "limits" {
		fs.IntVar(&opt.Loader.Workers, "workers", opt.Loader.Workers, "requests in flight at most (worker pool; connections per node)")
		fs.IntVar(&opt.Loader.Queue, "queue", opt.Loader.Queue, "scheduled requests that may wait for a worker (the wait counts in latency)")
		fs.DurationVar(&opt.Loader.Timeout, "timeout", opt.Loader.Timeout, "client timeout of a request (past it: a transport error)")
	}
	if inv.scenario == "reads" || inv.scenario == "browse" { // no audit, no limits; browse's --seed is its volume
		return
	}
	if inv.scenario != "limits" {
		fs.DurationVar(&opt.DrainTimeout, "drain-timeout", opt.DrainTimeout, "how long the audit waits for the pipeline (hot bids in PostgreSQL, ended auctions CLOSED)")
	}
	fs.DurationVar(&opt.LimitsDuration, "limits-duration", opt.LimitsDuration, "how long each store limit is measured")
	if inv.scenario != "limits" && inv.scenario != "close-burst" {
		fs.BoolVar(&opt.Limits, "limits", opt.Limits, "also measure the stores' own limits after the scenario and print bidgate's rate as a fraction of each")
	}
	fs.Uint64Var(&opt.Seed, "seed", 0, "random seed (0: random; the result records it)")
}

// registerOutput adds where the results go.
func (inv *invocation) registerOutput(fs *settings.FlagSet) {
	fs.StringVar(&inv.out, "out", "", "result file (JSON; the HTML report and the records go beside it) (default bench-results/<scenario>-<timestamp>.json)")
	fs.BoolVar(&inv.records, "records", true, "write every request to <out>.records.jsonl.gz")
	fs.BoolVar(&inv.quiet, "quiet", false, "no progress bar (there is none anyway when stderr is not a terminal)")
	fs.StringVar(&inv.cpuProfile, "cpuprofile", "", "write bidbench's own CPU profile (pprof) of the whole run to this file")
}

func registerFlashSale(fs *settings.FlagSet) play {
	c := bench.DefaultFlashSale()
	fs.IntVar(&c.Cold, "cold", c.Cold, "cold auctions")
	fs.StringVar(&c.Create, "create", "", "how cold auctions are created: api (concurrent POST /auctions, slower, more honest) or sql (one INSERT ... SELECT generate_series) (default sql above 10,000 auctions, api otherwise)")
	fs.IntVar(&c.CreateConc, "create-concurrency", c.CreateConc, "concurrent clients creating auctions through the API")
	fs.Float64Var(&c.ColdRate, "cold-rate", c.ColdRate, "bids/s spread at random over all cold auctions")
	fs.Float64Var(&c.ColdEndShare, "cold-end-share", c.ColdEndShare, "share of cold auctions that end inside the run")
	fs.IntVar(&c.Hot, "hot", c.Hot, "hot auctions (created through the API with \"hot\": true)")
	fs.Float64Var(&c.HotRate, "hot-rate", c.HotRate, "bids/s per hot auction")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "length of the load; hot auctions end at 3/4 of it and anti-sniping extends them past it")
	fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "the same load on the same auctions before --duration, audited but left out of latency, rates and CPU (reported on its own line): a node's first seconds grow its heap, connections and caches (0: none)")
	fs.DurationVar(&c.ExtendWindow, "extend-window", 0, "anti-sniping window of the auctions (default duration/12, at least 1s)")
	fs.DurationVar(&c.ExtendBy, "extend-by", 0, "anti-sniping extension (default the window)")
	fs.Float64Var(&c.RetryShare, "retry-share", c.RetryShare, "share of requests sent again with the same Idempotency-Key")
	fs.Float64Var(&c.TimeoutShare, "timeout-share", c.TimeoutShare, "share of the retried requests whose first attempt uses --short-timeout")
	fs.DurationVar(&c.ShortTimeout, "short-timeout", c.ShortTimeout, "client timeout of a deliberately timed-out first attempt")
	fs.DurationVar(&c.RetryDelay, "retry-delay", c.RetryDelay, "a retry goes up to this long after the first attempt's end")
	fs.IntVar(&c.LateBids, "late-bids", c.LateBids, "bids per hot auction (and over cold auctions that ended) sent after the end; all must be refused")
	fs.IntVar(&c.Bidders, "bidders", 0, "distinct bidder ids (default max(20000, 2 x total bids/s), so no bidder nears the 5/s limit)")
	fs.Float64Var(&c.ProxyShare, "proxy-share", c.ProxyShare, "share of bids sent as proxy bids (maxAmount)")
	fs.Float64Var(&c.RepeatShare, "repeat-share", c.RepeatShare, "share of bids by the bidder of the auction's latest proxy bid (raises, already_leading, max_not_raised)")
	fs.Float64Var(&c.ReserveShare, "reserve-share", c.ReserveShare, "share of cold auctions with a hidden reserve (and every other hot one while above 0)")
	fs.Float64Var(&c.BuyNowShare, "buy-now-share", c.BuyNowShare, "share of cold auctions with a buy-now price (and every other hot one while above 0)")
	fs.IntVar(&c.BuyNows, "buy-nows", c.BuyNows, "buy-now requests on cold auctions at the start (and one bought hot auction)")
	fs.IntVar(&c.Viewers, "viewers", c.Viewers, "WebSocket viewers of the hot auctions, round-robin over the targets and the auctions, connected before the load; "+
		"each reads until its auction's closed message (audited against the database)")
	fs.Float64Var(&c.ViewerConnectRate, "viewer-connect-rate", c.ViewerConnectRate, "viewers connected per second at most (no SYN flood)")
	fs.IntVar(&c.ViewersPerSource, "viewers-per-source", c.ViewersPerSource, "viewers per loopback source address (127.0.0.1, .2, ...), under bidgate's --ws-max-viewers-per-ip; 0: all from one")
	fs.IntVar(&c.Inboxes, "inboxes", c.Inboxes, "bidders (the first ones) connected to GET /ws/me before the load, round-robin over the targets, at --viewer-connect-rate and --viewers-per-source; the audit checks each got every notice stored for them live, once, and reports the lag by type")
	fs.Float64Var(&c.Pollers, "pollers", c.Pollers, "GET /auctions/{id} per second over the hot auctions and the targets during the load (open loop, with If-None-Match of the last ETag)")
	fs.BoolVar(&c.Floor, "floor", c.Floor, "after the audit, send the load's request rate for --duration to a do-nothing fasthttp server (the HTTP floor) and report bidgate's CPU per request and per decided bid as multiples of the floor's per answer")
	return func(ctx context.Context, e *bench.Env) (*bench.Result, error) { return e.FlashSale(ctx, c) }
}

// registerReads adds the flags of reads.
func registerReads(fs *settings.FlagSet) play {
	c := bench.DefaultReads()
	fs.Float64Var(&c.Rate, "rate", c.Rate, "GET/s offered in each run (open loop)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "length of each run")
	fs.IntVar(&c.Repeat, "repeat", c.Repeat, "rounds of floor, cold and hot, interleaved; the report gives each run and the medians")
	fs.BoolVar(&c.IfNoneMatch, "if-none-match", c.IfNoneMatch, "send the last ETag the node gave for the auction (measures 304s; the floor ignores it)")
	return func(ctx context.Context, e *bench.Env) (*bench.Result, error) { return e.ReadsRun(ctx, c) }
}

// registerBrowse adds the flags of browse.
func registerBrowse(fs *settings.FlagSet) play {
	c := bench.DefaultBrowse()
	fs.IntVar(&c.Auctions, "seed-auctions", c.Auctions, "auctions seeded with SQL (one in ten open)")
	fs.IntVar(&c.Bids, "seed-bids", c.Bids, "bids seeded with SQL, about: spread over the auctions with a skew")
	fs.BoolVar(&c.Seed, "seed", c.Seed, "seed a volume; false: browse the one an earlier run seeded")
	fs.IntVar(&c.Sellers, "sellers", c.Sellers, "distinct sellers of the seeded auctions")
	fs.IntVar(&c.Bidders, "bidders", c.Bidders, "distinct bidders of the seeded bids")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "actions/s offered (open loop); an action is a query and up to --pages - 1 more pages")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "length of the load")
	fs.IntVar(&c.Pages, "pages", c.Pages, "pages an action reads at most, following nextCursor")
	fs.DurationVar(&c.Solo, "solo", c.Solo, "after the mix, run each kind alone this long at --rate, for PostgreSQL's CPU per kind (0: none)")
	fs.BoolVar(&c.WithFlashSale, "with-flash-sale", c.WithFlashSale, "run a small flash sale (audited) beside the load, over the same duration")
	fs.IntVar(&c.FlashCold, "flash-cold", c.FlashCold, "--with-flash-sale: its cold auctions (created with SQL)")
	fs.Float64Var(&c.FlashColdRate, "flash-cold-rate", c.FlashColdRate, "--with-flash-sale: bids/s over its cold auctions")
	fs.IntVar(&c.FlashHot, "flash-hot", c.FlashHot, "--with-flash-sale: its hot auctions")
	fs.Float64Var(&c.FlashHotRate, "flash-hot-rate", c.FlashHotRate, "--with-flash-sale: bids/s per hot auction")
	return func(ctx context.Context, e *bench.Env) (*bench.Result, error) { return e.BrowseRun(ctx, c) }
}

// registerRamp adds the flags of hot-max or cold-max.
func registerRamp(fs *settings.FlagSet, scenario string) play {
	c := bench.DefaultHotMax()
	if scenario == "cold-max" {
		c = bench.DefaultColdMax()
	}
	fs.Float64Var(&c.StartRate, "start-rate", c.StartRate, "bids/s of the first step")
	fs.Float64Var(&c.Factor, "factor", c.Factor, "rate multiplier per step")
	fs.DurationVar(&c.Step, "step", c.Step, "length of a step")
	fs.IntVar(&c.MaxSteps, "max-steps", c.MaxSteps, "steps at most")
	fs.Float64Var(&c.MaxRate, "max-rate", c.MaxRate, "rate at most")
	fs.DurationVar(&c.P99, "p99", c.P99, "a step holds while its p99 (all answers) stays at or under this and no 5xx/transport error appears")
	fs.IntVar(&c.Bidders, "bidders", 0, "distinct bidder ids (default max(20000, max-rate/2))")
	fs.BoolVar(&c.Floor, "floor", false, "after the audit, send the best step's rate (the last step's when none held) for one step to a do-nothing fasthttp server (the HTTP floor) and report bidgate's CPU per answer at that step as a multiple of the floor's")
	return func(ctx context.Context, e *bench.Env) (*bench.Result, error) {
		if scenario == "cold-max" {
			return e.ColdMax(ctx, c)
		}
		return e.HotMax(ctx, c)
	}
}

func registerCloseBurst(fs *settings.FlagSet) play {
	c := bench.DefaultCloseBurst()
	fs.IntVar(&c.Auctions, "auctions", c.Auctions, "auctions ending in the same second (created in PostgreSQL)")
	fs.DurationVar(&c.Lead, "lead", c.Lead, "how far ahead, on the database clock, that second is")
	fs.Float64Var(&c.BidShare, "bid-share", c.BidShare, "share of the auctions that get one bid before the end (so there are winners)")
	fs.Float64Var(&c.BidRate, "bid-rate", c.BidRate, "bids/s of those bids")
	fs.IntVar(&c.LateBids, "late-bids", c.LateBids, "bids sent after the end; all must be refused")
	fs.DurationVar(&c.Timeout, "close-timeout", c.Timeout, "how long to wait for all to be CLOSED")
	fs.IntVar(&c.Bidders, "bidders", 0, "distinct bidder ids (default max(20000, auctions))")
	return func(ctx context.Context, e *bench.Env) (*bench.Result, error) { return e.CloseBurstRun(ctx, c) }
}

// run connects the harness, plays the scenario and reports; it returns the
// exit code: 1 when the run failed or a check did.
func (inv *invocation) run(ctx context.Context) int {
	if inv.cpuProfile != "" {
		stop, err := startCPUProfile(inv.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bidbench:", err)
			return 1
		}
		defer stop()
	}
	if inv.compare.nodes != "" {
		return inv.runCompared(ctx)
	}
	res, err := inv.playOnce(ctx, inv.opt, inv.out)
	if res == nil {
		fmt.Fprintln(os.Stderr, "bidbench:", err)
		return 1
	}
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "bidbench:", err)
		return 1
	case !res.Passed():
		fmt.Fprintf(os.Stderr, "bidbench: %d check(s) FAILED\n", len(res.Failed()))
		return 1
	}
	return 0
}

// playOnce connects the harness with opt, plays the scenario and reports
// it to out; a nil result is a run that could not be played.
func (inv *invocation) playOnce(ctx context.Context, opt bench.Options, out string) (*bench.Result, error) {
	e, err := bench.NewEnv(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	res, err := inv.play(ctx, e)
	if res != nil {
		inv.report(res, out, inv.scenario)
	}
	return res, err
}

// runCompared plays the scenario on a dev cluster of each size of
// --compare-nodes in turn, each started for its run and stopped after it,
// and prints the runs side by side.
func (inv *invocation) runCompared(ctx context.Context) int {
	sizes, err := parseSizes(inv.compare.nodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bidbench: --compare-nodes:", err)
		return 2
	}
	bin, err := exec.LookPath(inv.compare.bidgate)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bidbench: --bidgate:", err)
		return 2
	}
	var runs []bench.Compared
	code := 0
	for _, n := range sizes {
		out := inv.out
		if out != "" {
			out = strings.TrimSuffix(out, ".json") + fmt.Sprintf("-nodes%d.json", n)
		}
		logPath := strings.TrimSuffix(bench.DefaultOut(fmt.Sprintf("%s-nodes%d", inv.scenario, n), time.Now()), ".json") + ".log"
		if out != "" {
			logPath = strings.TrimSuffix(out, ".json") + ".log"
		}
		fmt.Fprintf(os.Stderr, "bidbench: starting a %d-node bidgate dev cluster (log %s)\n", n, logPath)
		c, err := bench.StartDevCluster(ctx, bin, n, inv.compare.basePort, inv.opt, logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bidbench:", err)
			return 1
		}
		opt := inv.opt
		opt.Targets, opt.Metrics = c.Targets, ""
		res, err := inv.playOnce(ctx, opt, out)
		if stopErr := c.Stop(); stopErr != nil {
			fmt.Fprintln(os.Stderr, "bidbench:", stopErr)
		}
		if res == nil {
			fmt.Fprintln(os.Stderr, "bidbench:", err)
			return 1
		}
		if err != nil || !res.Passed() {
			fmt.Fprintf(os.Stderr, "bidbench: the %d-node run failed: %v, %d check(s) failed\n", n, err, len(res.Failed()))
			code = 1
		}
		runs = append(runs, bench.Compared{Nodes: n, Result: res})
		if ctx.Err() != nil {
			break
		}
	}
	bench.WriteComparison(os.Stdout, runs)
	return code
}

// parseSizes reads cluster sizes: "1,3".
func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 9 {
			return nil, fmt.Errorf("%q is not a cluster size (1-9)", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// report writes the result files to out (default bench-results/) and
// prints the text report.
func (inv *invocation) report(res *bench.Result, out, scenario string) {
	if res.Finished.IsZero() {
		res.Finished = time.Now()
	}
	path := out
	if path == "" {
		path = bench.DefaultOut(scenario, res.Started)
	}
	if err := bench.WriteOutputs(res, path, inv.records); err != nil {
		fmt.Fprintln(os.Stderr, "bidbench:", err)
	}
	bench.WriteText(os.Stdout, res)
}

// startCPUProfile profiles bidbench itself until the returned stop is
// called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "bidbench: --cpuprofile:", err)
		}
	}, nil
}
