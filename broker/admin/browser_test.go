package admin_test

// The web inspector driven in headless Chromium (Debian's chromium
// package; .ci/run installs it) against a real broker: what the page
// shows is checked in the DOM, every update arrives over the event stream
// with no reload, and any JavaScript error or console error fails the
// test. One Chromium serves every subtest, each in its own tab.
//
// Each view's screenshot is written to the test's artifact directory (go
// test -artifacts keeps them). `make screenshots` sets KAAS_SCREENSHOTS
// to docs/inspector: the views are then captured after a longer run of
// traffic, for docs/observability.md.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/storage/partlog/batchtest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// chromiumPath finds the browser: $KAAS_CHROMIUM, else chromium on PATH.
func chromiumPath() (string, error) {
	if p := os.Getenv("KAAS_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH: install Debian's chromium package (apt-get install chromium; .ci/run does) or set KAAS_CHROMIUM")
}

// startBrowser starts one headless Chromium for the test and its subtests.
// The flags keep it off the network (the machine has none; without them
// it stalls on connection attempts) and let it run as root.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	// The first Do launches the browser; it lives as long as browserCtx, so
	// this call has no timeout of its own.
	if err := chromedp.Do(browserCtx); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	return browserCtx
}

// page is the browser tab the subtests share (a new tab starts a renderer
// process, which costs seconds on a loaded machine; navigating reuses it).
type page struct {
	t    *testing.T // the subtest using the tab
	ctx  context.Context
	base string

	mu   sync.Mutex
	errs []string
}

// newTab opens the tab, closed when the test ends (before the broker
// stops: cleanups run in reverse). It collects every JavaScript exception
// and console error; visit fails the subtest that caused any.
func newTab(t *testing.T, browser context.Context, base string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	p := &page{t: t, ctx: ctx, base: base}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == "error" || m.Type == "assert" || m.IsException() {
				p.mu.Lock()
				p.errs = append(p.errs, m.String())
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	p.do("sizing the tab", chromedp.EmulateViewport(1280, 800))
	return p
}

// visit opens path for subtest t and waits for the first view from the
// stream; the subtest fails on any browser error meanwhile.
func (p *page) visit(t *testing.T, path string) *page {
	t.Helper()
	p.t = t
	t.Cleanup(func() {
		// Leave the page before the next subtest so its stream closes, and
		// report what the browser said while this one ran.
		_ = chromedp.Do(p.ctx, chromedp.Navigate("about:blank"))
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.errs {
			t.Errorf("browser reported an error on %s: %s", path, e)
		}
		p.errs = nil
	})
	p.do("opening "+path, chromedp.Navigate(p.base+path))
	p.waitFor("the first view from the stream", `document.getElementById('live').classList.contains('on')`, 10*time.Second)
	// Marks this document: a reload would lose it.
	p.do("marking the document", chromedp.Evaluate[chromedp.Void](`window.__noReload = 'kept'`))
	return p
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// eval runs a JavaScript expression and returns its value.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// waitFor polls the expression in the page until it is truthy, and
// returns how long that took.
func (p *page) waitFor(what, js string, d time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(p.ctx, d+5*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil || !ok {
		body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.getElementById('main').innerText.slice(0, 3000)`))
		p.t.Fatalf("waiting %v for %s (%s): %v\npage text:\n%s", d, what, js, err, body)
	}
	return time.Since(start)
}

// noReload fails the test if the document was reloaded since open.
func (p *page) noReload() {
	p.t.Helper()
	if mark := eval[string](p, `window.__noReload || ''`); mark != "kept" {
		p.t.Fatal("the page reloaded")
	}
}

// text is the innerText of the first element matching the CSS selector
// ("" if none).
func (p *page) text(sel string) string {
	p.t.Helper()
	return strings.TrimSpace(eval[string](p, fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ''`, sel)))
}

// screenshot writes the viewport as name.png to the test's artifact
// directory, and to $KAAS_SCREENSHOTS when docs is set.
func (p *page) screenshot(name string, docs bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	dirs := []string{p.t.ArtifactDir()}
	if d := os.Getenv("KAAS_SCREENSHOTS"); d != "" && docs {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

// typeFilter types into the (empty) filter box.
func (p *page) typeFilter(q string) {
	p.t.Helper()
	p.do("typing a filter", chromedp.Focus(chromedp.CSS("#q")), chromedp.SendKeys(chromedp.CSS("#q"), q))
}

// inspectorBroker starts a broker with its admin listener on loopback.
func inspectorBroker(t *testing.T) (*broker.Broker, string) {
	t.Helper()
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) {
		c.AdminAddr = "127.0.0.1:0"
		c.FencePollInterval = 100 * time.Millisecond
	}))
	return b, "http://" + b.AdminAddr()
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(brokertest.Context(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestInspectorInChromium drives every view of the page.
func TestInspectorInChromium(t *testing.T) {
	browser := startBrowser(t)
	b, base := inspectorBroker(t)
	tab := newTab(t, browser, base)
	addr := b.Addr()
	brokertest.CreateTopic(t, addr, "orders", 3, nil)
	producer := brokertest.Client(t, addr, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		produce(t, producer, &kgo.Record{Partition: p, Value: []byte("first")})
	}

	t.Run("overview lists the actors that exist", func(t *testing.T) {
		pg := tab.visit(t, "/")
		var want []string
		for _, a := range b.Actors().Actors() {
			want = append(want, a.Name)
		}
		js := fmt.Sprintf(`(() => { const have = new Set(Array.from(document.querySelectorAll('tr[data-actor]')).map(e => e.dataset.actor));
			return %s.every(n => have.has(n)); })()`, jsList(want))
		pg.waitFor("every live actor listed", js, 10*time.Second)
		pg.waitFor("the kinds table", `document.querySelector('#t-kinds tr[data-kind="partition"]') !== null`, 5*time.Second)
		pg.waitFor("Produce in the API table", `document.querySelector('#t-apis tr[data-api="Produce"]') !== null`, 5*time.Second)
		if got := pg.text(`#c-broker .big`); got != "broker 0" {
			t.Errorf("broker card says %q", got)
		}
		if got := pg.text(`#t-kinds tr[data-kind="partition"] td:nth-child(2)`); got != "3" {
			t.Errorf("partition actors by kind: %q, want 3", got)
		}
		// No raw Go values anywhere on the page.
		body := eval[string](pg, `document.body.innerText`)
		for _, bad := range []string{"<nil>", "map[", "undefined", "NaN"} {
			if strings.Contains(body, bad) {
				t.Errorf("the page shows %q", bad)
			}
		}
		pg.screenshot("overview", false)
	})

	t.Run("a produced record moves the partition's numbers live", func(t *testing.T) {
		pg := tab.visit(t, "/")
		hw := `document.querySelector('tr[data-actor="partition/orders-0"] [data-k="hw"]')`
		pg.waitFor("orders-0's high watermark at 1", hw+` && `+hw+`.innerText.trim() === 'hw 1'`, 10*time.Second)
		produce(t, producer, &kgo.Record{Partition: 0, Value: []byte("second")})
		took := pg.waitFor("orders-0's high watermark at 2 within 2 s", hw+`.innerText.trim() === 'hw 2'`, 2*time.Second)
		t.Logf("the page showed the new high watermark %v after the produce was acknowledged", took.Round(time.Millisecond))
		pg.noReload()
	})

	t.Run("an InitProducerId bump and a zombie appear on the timeline", func(t *testing.T) {
		first := brokertest.Client(t, addr, kgo.TransactionalID("bumper"), kgo.DefaultProduceTopic("orders"))
		pid, epoch := initProducer(t, first)
		pg := tab.visit(t, "/kip360")
		second := brokertest.Client(t, addr, kgo.TransactionalID("bumper"), kgo.DefaultProduceTopic("orders"))
		pid2, epoch2 := initProducer(t, second)
		if pid2 != pid || epoch2 != epoch+1 {
			t.Fatalf("second session got (%d, %d), want (%d, %d)", pid2, epoch2, pid, epoch+1)
		}
		sendZombie(t, addr, "orders", 1, pid, epoch)
		pg.waitFor("the bump on the timeline", fmt.Sprintf(`Array.from(document.querySelectorAll('#k-events tr[data-kind="epoch_bump"]')).some(tr =>
			tr.querySelector('[data-f="pid"]').innerText.trim() === '%d' && tr.querySelector('[data-f="epochs"]').innerText.trim() === '%d → %d' &&
			tr.innerText.includes('rejoin') && tr.innerText.includes('bumper'))`, pid, epoch, epoch+1), 10*time.Second)
		pg.waitFor("its fence", fmt.Sprintf(`Array.from(document.querySelectorAll('#k-events tr[data-kind="fence"]')).some(tr =>
			tr.querySelector('[data-f="pid"]').innerText.trim() === '%d' && tr.querySelector('[data-f="epochs"]').innerText.includes('→ %d'))`, pid, epoch+1), 10*time.Second)
		pg.waitFor("the zombie on the timeline", fmt.Sprintf(`Array.from(document.querySelectorAll('#k-events tr[data-kind="zombie_rejected"]')).some(tr =>
			tr.innerText.includes('%d') && tr.innerText.includes('orders-1') && tr.innerText.includes('INVALID_PRODUCER_EPOCH'))`, pid), 10*time.Second)
		pg.waitFor("the fence in force", fmt.Sprintf(`document.querySelector('#k-floortable tr[data-pid="%d"] td.n')?.innerText.trim() === '%d'`, pid, epoch+1), 10*time.Second)
		pg.waitFor("the timeline marks", `document.querySelectorAll('#k-tl circle').length >= 3`, 5*time.Second)
		pg.noReload()
		pg.screenshot("kip360", false)
	})

	t.Run("an open transaction shows its age and the LSO gap", func(t *testing.T) {
		brokertest.CreateTopic(t, addr, "payments", 1, nil)
		txp := brokertest.Client(t, addr, kgo.TransactionalID("stuck"), kgo.DefaultProduceTopic("payments"),
			kgo.TransactionTimeout(60*time.Second))
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(t, txp, &kgo.Record{Value: []byte("pending")})
		pg := tab.visit(t, "/transactions")
		age := `document.querySelector('#x-open tr[data-txn="stuck"] [data-f="age"]')`
		pg.waitFor("the open transaction", age+` !== null`, 10*time.Second)
		first := pg.text(`#x-open tr[data-txn="stuck"] [data-f="age"]`)
		if !strings.Contains(first, "/ 1m 0s") {
			t.Errorf("age cell %q does not show the 60 s timeout", first)
		}
		pg.waitFor("the age growing", fmt.Sprintf(`%s.innerText.trim() !== %q`, age, first), 5*time.Second)
		pg.waitFor("payments-0's LSO gap of 1", `document.querySelector('#x-lso tr[data-partition="payments-0"] [data-f="gap"]')?.innerText.trim() === '1'`, 5*time.Second)
		if got := pg.text(`#x-lso tr[data-partition="payments-0"]`); !strings.Contains(got, "stuck") {
			t.Errorf("payments-0 row %q does not name the transaction holding it back", got)
		}
		pg.noReload()
		pg.screenshot("transactions", false)
		if err := txp.EndTransaction(brokertest.Context(t, 30*time.Second), kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("filtering narrows the list", func(t *testing.T) {
		pg := tab.visit(t, "/")
		pg.waitFor("several actors", `document.querySelectorAll('tr[data-actor]').length > 3`, 10*time.Second)
		pg.typeFilter("ORDERS-1")
		pg.waitFor("only orders-1", `(() => { const r = Array.from(document.querySelectorAll('tr[data-actor]')).map(e => e.dataset.actor);
			return r.length === 1 && r[0] === 'partition/orders-1'; })()`, 5*time.Second)
		if url := eval[string](pg, `location.search`); url != "?q=ORDERS-1" {
			t.Errorf("the URL carries %q, want ?q=ORDERS-1", url)
		}
		pg.noReload()
	})

	t.Run("a deep link opens the right actor", func(t *testing.T) {
		pg := tab.visit(t, "/actors/partition/orders-2")
		pg.waitFor("the actor's state", `document.getElementById('a-state').innerText.includes('high_watermark')`, 5*time.Second)
		if got := pg.text("#a-name"); got != "partition/orders-2" {
			t.Fatalf("deep link opened %q", got)
		}
		pg.waitFor("its producer linked", `document.querySelector('#a-links [data-rel="producer"]') !== null`, 5*time.Second)
		tree := eval[string](pg, `document.getElementById('a-state').innerText`)
		if !strings.Contains(tree, "topic: orders") || strings.Contains(tree, "null") {
			t.Errorf("state tree:\n%s", tree)
		}
		pg.screenshot("actor", false)

		// A passivated or running transactional id is linked from the
		// transactions view and opens with its partitions.
		pg.do("following a link", chromedp.Navigate(base+"/actors/txn/bumper"))
		pg.waitFor("the transactional id's state", `document.getElementById('a-state').innerText.includes('producer_id')`, 5*time.Second)
	})

	if dir := os.Getenv("KAAS_SCREENSHOTS"); dir != "" {
		t.Run("screenshots for the docs", func(t *testing.T) { docsScreenshots(t, tab, b) })
	}
}

func jsList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// initProducer runs InitProducerId for a transactional client and returns
// its producer id and epoch.
func initProducer(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	ctx := brokertest.Context(t, 30*time.Second)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return pid, epoch
}

// sendZombie produces one idempotent batch at a fenced epoch on a bare
// connection, as a zombie of the earlier session would.
func sendZombie(t *testing.T, addr, topic string, partition int32, pid int64, epoch int16) {
	t.Helper()
	c := brokertest.Dial(t, addr)
	defer c.Close()
	batch := batchtest.Build(batchtest.Opts{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0, Timestamp: time.Now().UnixMilli()}, "zombie")
	resp := c.RoundTrip(brokertest.ProduceRequest(topic, partition, -1, batch)).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("the zombie batch got error %d, want INVALID_PRODUCER_EPOCH", code)
	}
}

// docsScreenshots captures each view for docs/observability.md after a run of
// traffic that gives the charts a shape: a steady producer, a consumer
// group, epoch bumps, a zombie and a transaction left open.
func docsScreenshots(t *testing.T, tab *page, b *broker.Broker) {
	addr := b.Addr()
	brokertest.CreateTopic(t, addr, "clicks", 6, nil)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Add(2)
	go func() { // a producer whose rate swells and ebbs
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("clicks"))
		if err != nil {
			return
		}
		defer cl.Close()
		for i := 0; ctx.Err() == nil; i++ {
			n := 20 + 15*(i%40)
			for range n {
				cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("click %d", i))}, nil)
			}
			_ = cl.Flush(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	go func() { // a consumer group reading it
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("dashboards"), kgo.ConsumeTopics("clicks"))
		if err != nil {
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	// A transaction left open while the rest runs: its age grows against
	// its timeout and it holds back the LSO of the partitions it wrote.
	open := brokertest.Client(t, addr, kgo.TransactionalID("invoices"), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(90*time.Second))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, open, &kgo.Record{Partition: 0, Value: []byte("invoice 1")}, &kgo.Record{Partition: 2, Value: []byte("invoice 2")})
	// A peer broker sharing the volume fences one of its producers: its
	// fence file arrives by polling.
	peerPID := int64(8)<<40 + 5
	peerFile := filepath.Join(b.DataDir(), "__cluster", "producer_fences", "from-7.json")
	if err := os.WriteFile(peerFile, []byte(fmt.Sprintf(`{"%d":3}`, peerPID)), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // sessions of one transactional id, each fencing the last
		cl := brokertest.Client(t, addr, kgo.TransactionalID("checkout"), kgo.DefaultProduceTopic("orders"))
		pid, epoch := initProducer(t, cl)
		if i == 2 {
			sendZombie(t, addr, "orders", 2, pid, epoch-1)
		}
		time.Sleep(4 * time.Second)
	}
	time.Sleep(40 * time.Second)
	for _, v := range []struct{ name, path string }{
		{"overview", "/"}, {"actor", "/actors/partition/clicks-0"}, {"actor-group", "/actors/group/dashboards"},
		{"kip360", "/kip360"}, {"transactions", "/transactions"},
	} {
		pg := tab.visit(t, v.path)
		pg.waitFor("charts drawn", `document.querySelectorAll('#main').length === 1`, 5*time.Second)
		time.Sleep(1500 * time.Millisecond) // two stream updates: charts settle
		pg.screenshot(v.name, true)
	}
}
