/**
 * The few pieces every page shares. Values from the trail and the service go into the page as text
 * children only (Preact creates text nodes for them): nothing here or anywhere in the portal sets HTML.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { formatTime } from './time.ts';

/** A modal <dialog>: the platform's focus trap, Escape to close, focus returned to where it was. */
export function Modal(props: { title: string; onClose: () => void; children: ComponentChildren; labelId?: string }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const labelId = props.labelId ?? 'dialog-title';
  useEffect(() => {
    const element = dialog.current!;
    const opener = document.activeElement as HTMLElement | null;
    element.showModal();
    return () => {
      if (element.open) element.close();
      opener?.focus();
    };
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby={labelId} onClose={props.onClose} onCancel={props.onClose}>
      <header class="dialog-header">
        <h2 id={labelId}>{props.title}</h2>
        <button type="button" class="secondary" onClick={props.onClose}>
          Close
        </button>
      </header>
      <div class="dialog-body">{props.children}</div>
    </dialog>
  );
}

export function ErrorNotice(props: { error: unknown }) {
  if (props.error === undefined || props.error === null) return null;
  const message = props.error instanceof Error ? props.error.message : String(props.error);
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

/**
 * Copies a value (an id, a URL, a secret) to the clipboard and says so. Where the browser refuses the
 * clipboard (a frame without allow="clipboard-write"), it says that instead: the value stays selectable.
 */
export function CopyButton(props: { value: string; label: string; children?: ComponentChildren }) {
  const [said, setSaid] = useState<string | undefined>();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setSaid('Copied.');
    } catch {
      setSaid('The browser refused the clipboard here: select the text and copy it.');
    }
    setTimeout(() => setSaid(undefined), 4_000);
  };
  return (
    <span class="copy">
      <button type="button" class="secondary small" aria-label={props.label} onClick={copy}>
        {props.children ?? 'Copy'}
      </button>
      <span role="status" class="copied">
        {said}
      </span>
    </span>
  );
}

/** A secret shown once, with a copy button. */
export function OnceSecret(props: { label: string; secret: string }) {
  return (
    <div class="secret">
      <p>
        <strong>{props.label}</strong> It is shown this once; the service keeps it encrypted and never shows it again.
      </p>
      <code data-testid="secret">{props.secret}</code>
      <CopyButton value={props.secret} label="Copy">
        Copy
      </CopyButton>
    </div>
  );
}

/** Runs an async action, keeping its busy state and its error for the page to show. */
export function useAction(): {
  busy: boolean;
  error: unknown;
  run: (action: () => Promise<void>) => Promise<void>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const run = async (action: () => Promise<void>) => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, clear: () => setError(undefined) };
}

/** An ISO timestamp in the person's time zone, named; the exact value the service sent on hover. */
export function Time(props: { value: string | null }) {
  if (!props.value) return <span>—</span>;
  return (
    <time dateTime={props.value} title={props.value}>
      {formatTime(props.value)}
    </time>
  );
}
