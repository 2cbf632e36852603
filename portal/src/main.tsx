/**
 * The customer portal (docs/portal.md): opened by a link a platform's backend minted for one tenant, it
 * shows that tenant's trail, webhooks and log streams through the public API, with the session's capabilities.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { PortalApi, type Page } from './api.ts';
import { SESSION_OVER, UNREACHABLE, openSession, type Opening, type Refusal } from './session.ts';
import { StreamsPage } from './streams/StreamsPage.tsx';
import { PAGE_SIZE, TrailPage } from './trail/TrailPage.tsx';
import type { AuditEvent, PortalSession } from './types.ts';
import { Time } from './ui.tsx';
import { WebhooksPage } from './webhooks/WebhooksPage.tsx';

type PageName = 'trail' | 'webhooks' | 'streams';

/** Why the portal is not showing the trail, and what to do next: a page of its own, with the portal's name. */
function Refused(props: { refusal: Refusal }) {
  const { refusal } = props;
  return (
    <main class="refused">
      <p class="brand" aria-hidden="true">
        Audit trail
      </p>
      <h1>{refusal.title}</h1>
      <p>{refusal.message}</p>
      <p class="next">
        <strong>What to do:</strong> {refusal.next}
      </p>
      {refusal.retry && (
        <button type="button" onClick={() => location.reload()}>
          Try again
        </button>
      )}
    </main>
  );
}

function Portal(props: { session: PortalSession; api: PortalApi; firstPage: Promise<Page<AuditEvent>> }) {
  const { session, api } = props;
  const [over, setOver] = useState<Refusal | undefined>();
  const [page, setPage] = useState<PageName>('trail');
  useEffect(() => api.onSessionOver(() => setOver(SESSION_OVER.ended)), [api]);
  useEffect(() => {
    const timer = setTimeout(() => setOver(SESSION_OVER.expired), Math.max(0, Date.parse(session.expires_at) - Date.now()));
    return () => clearTimeout(timer);
  }, [session.expires_at]);

  if (over) return <Refused refusal={over} />;
  const signOut = async () => {
    await api.request('DELETE', `/portal/sessions/${session.id}`).catch(() => undefined);
    setOver(SESSION_OVER.signedOut);
  };
  const tab = (name: PageName, label: string) => (
    <button type="button" class="tab" aria-current={page === name ? 'page' : undefined} onClick={() => setPage(name)}>
      {label}
    </button>
  );
  return (
    <>
      <header class="top">
        <span class="tenant">
          Tenant <strong>{session.tenant_id}</strong>
        </span>
        <nav aria-label="Portal">
          {tab('trail', 'Trail')}
          {tab('webhooks', 'Webhooks')}
          {tab('streams', 'Log streams')}
        </nav>
        <span class="expiry">
          Session until <Time value={session.expires_at} />
        </span>
        <button type="button" class="secondary" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>
        {page === 'trail' && <TrailPage api={api} session={session} firstPage={props.firstPage} />}
        {page === 'webhooks' && <WebhooksPage api={api} session={session} />}
        {page === 'streams' && <StreamsPage api={api} session={session} />}
      </main>
    </>
  );
}

/**
 * The trail's first page is asked for as soon as the session is open, before anything renders: the list is
 * what the person came for, and its request then overlaps the first render (bench/portal.ts).
 */
function App(props: { opening: Opening }) {
  const { opening } = props;
  if (opening.kind === 'refused') return <Refused refusal={opening} />;
  const api = new PortalApi(opening.token);
  const firstPage = api.listEvents({}, undefined, PAGE_SIZE);
  // Its failure is the trail page's to show.
  firstPage.catch(() => undefined);
  return <Portal session={opening.session} api={api} firstPage={firstPage} />;
}

const root = document.getElementById('portal')!;
openSession()
  .catch((): Opening => ({ kind: 'refused', ...UNREACHABLE }))
  .then((opening) => {
    // The page's "Opening…" placeholder goes; Preact renders into an empty element.
    root.replaceChildren();
    render(<App opening={opening} />, root);
  })
  .catch((error: unknown) => console.error(error));
