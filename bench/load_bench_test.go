package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
)

// cannedServerEnv makes TestCannedBidServer serve instead of returning.
const cannedServerEnv = "BIDBENCH_CANNED_BID_SERVER"

// TestCannedBidServer is not a test: BenchmarkLoaderBid runs the test
// binary again with cannedServerEnv set, and this answers every request
// with a fixed 201 bid body from that separate process, so that the
// benchmark's own CPU time is the generator's alone. Anywhere else it
// returns at once (a pass, not a skip).
func TestCannedBidServer(t *testing.T) {
	if os.Getenv(cannedServerEnv) == "" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	answer := []byte(`{"auctionId":42,"bidderId":1000001,"kind":"straight","amount":"1001.00","leading":true,"currentPrice":"1001.00",` +
		`"requestId":"6f1c2b1e-7f5a-4d2e-9a57-0c1f4f3b2a10",` +
		`"acceptedAt":"2030-01-02T15:04:05.123456Z","endTime":"2030-01-02T16:04:05Z","seq":17}`)
	fmt.Println("listening", ln.Addr())
	// Serves until the benchmark kills the process.
	_ = (&fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusCreated)
		ctx.SetContentType("application/json")
		ctx.SetBody(answer)
	}}).Serve(ln)
}

// BenchmarkLoaderBid is the generator's own cost per bid: building the job
// (as the ramp does), sending it and recording the answer. cpu-µs/op is
// this process's CPU time (getrusage) per bid; the answers come from
// another process.
func BenchmarkLoaderBid(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCannedBidServer$")
	cmd.Env = append(os.Environ(), cannedServerEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		b.Fatalf("answering process: %q, %v", line, err)
	}

	key, err := auth.GenerateKey("EdDSA")
	if err != nil {
		b.Fatal(err)
	}
	tokens := NewTokens(key, auth.DevIssuer, auth.DevAudience, 0)
	var bs bidders
	bs.base = bidderFloor
	bs.reset(1000)
	if err := tokens.Warm(bs.base, 1000, auth.ScopeBid); err != nil {
		b.Fatal(err)
	}
	rec := &Recorder{}
	ld := NewLoader(context.Background(), []Target{{Base: "http://" + addr, Addr: addr}},
		LoaderConfig{Workers: 64, Queue: 4096, Timeout: 5 * time.Second}, rec, tokens)
	defer ld.Close()
	rec.reserve(b.N)
	b.ReportAllocs()
	cpu0, err := selfCPUSeconds()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	now := time.Now()
	for k := range b.N {
		ld.Submit(Job{AuctionID: 42, Key: uuid.New(), BidderID: bs.id(), Amount: cents(hotStartCents + incCents*int64(k+1)),
			Kind: KindBid, Step: 1, Intended: now})
	}
	ld.Wait()
	b.StopTimer()
	cpu1, err := selfCPUSeconds()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "cpu-µs/op")
	if n := rec.Len(); n != b.N {
		b.Fatalf("%d records for %d bids", n, b.N)
	}
	if r := rec.Records()[0]; r.Outcome != Created || r.Seq != 17 || r.EndTime.IsZero() {
		b.Fatalf("first record %+v", r)
	}
}
