/**
 * The customer portal (docs/portal.md): opened by a link a platform's backend minted for one tenant, it
 * shows that tenant's trail and webhooks through the public API, with the session's capabilities.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { PortalApi, type Page } from './api.ts';
import { openSession, type Opening } from './session.ts';
import { PAGE_SIZE, TrailPage } from './trail/TrailPage.tsx';
import type { AuditEvent, PortalSession } from './types.ts';
import { Time } from './ui.tsx';
import { WebhooksPage } from './webhooks/WebhooksPage.tsx';

type PageName = 'trail' | 'webhooks';

function Refused(props: { title: string; message: string }) {
  return (
    <main class="refused">
      <h1>{props.title}</h1>
      <p>{props.message}</p>
    </main>
  );
}

function Portal(props: { session: PortalSession; api: PortalApi; firstPage: Promise<Page<AuditEvent>> }) {
  const { session, api } = props;
  const [over, setOver] = useState<{ title: string; message: string } | undefined>();
  const [page, setPage] = useState<PageName>('trail');
  useEffect(
    () =>
      api.onSessionOver(() => setOver({ title: 'This session has ended', message: 'Ask for a new portal link where you got this one.' })),
    [api],
  );
  useEffect(() => {
    const timer = setTimeout(
      () => setOver({ title: 'This session has expired', message: 'Ask for a new portal link where you got this one.' }),
      Math.max(0, Date.parse(session.expires_at) - Date.now()),
    );
    return () => clearTimeout(timer);
  }, [session.expires_at]);

  if (over) return <Refused {...over} />;
  const signOut = async () => {
    await api.request('DELETE', `/portal/sessions/${session.id}`).catch(() => undefined);
    setOver({ title: 'Signed out', message: 'This portal session has ended. Open a new link to come back.' });
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
        </nav>
        <span class="expiry">
          Session until <Time value={session.expires_at} />
        </span>
        <button type="button" class="secondary" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>
        {page === 'trail' ? (
          <TrailPage api={api} session={session} firstPage={props.firstPage} />
        ) : (
          <WebhooksPage api={api} session={session} />
        )}
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
  if (opening.kind === 'refused') return <Refused title={opening.title} message={opening.message} />;
  const api = new PortalApi(opening.token);
  const firstPage = api.listEvents({}, undefined, PAGE_SIZE);
  // Its failure is the trail page's to show.
  firstPage.catch(() => undefined);
  return <Portal session={opening.session} api={api} firstPage={firstPage} />;
}

const root = document.getElementById('portal')!;
openSession()
  .catch((): Opening => ({ kind: 'refused', title: 'The service cannot be reached', message: 'Try again in a moment.' }))
  .then((opening) => {
    // The page's "Opening…" placeholder goes; Preact renders into an empty element.
    root.replaceChildren();
    render(<App opening={opening} />, root);
  })
  .catch((error: unknown) => console.error(error));
