/**
 * The few pieces every page shares. Values from the trail and the service go into the page as text
 * children only (Preact creates text nodes for them): nothing here or anywhere in the portal sets HTML.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

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
      {props.children}
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

/** A secret shown once, with a copy button; the text stays selectable where the clipboard is refused (some frames). */
export function OnceSecret(props: { label: string; secret: string }) {
  const [copied, setCopied] = useState<string | undefined>();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.secret);
      setCopied('Copied.');
    } catch {
      setCopied('The browser refused the clipboard here: select the text and copy it.');
    }
  };
  return (
    <div class="secret">
      <p>
        <strong>{props.label}</strong> It is shown this once; the service keeps it encrypted and never shows it again.
      </p>
      <code data-testid="secret">{props.secret}</code>
      <button type="button" onClick={copy}>
        Copy
      </button>
      <span role="status">{copied}</span>
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

// One formatter for the page: toLocaleString() builds a new one per call, which a page of rows pays 50 times.
let localTime: Intl.DateTimeFormat | undefined;

/** An ISO timestamp as the person's local time, with the exact UTC value on hover. */
export function Time(props: { value: string | null }) {
  if (!props.value) return <span>—</span>;
  const date = new Date(props.value);
  localTime ??= new Intl.DateTimeFormat(undefined, {
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: '2-digit',
    second: '2-digit',
  });
  return (
    <time dateTime={props.value} title={props.value}>
      {Number.isNaN(date.getTime()) ? props.value : localTime.format(date)}
    </time>
  );
}

/** A datetime-local input's value (local time) as RFC 3339 UTC; undefined when empty. */
export function localInputToIso(value: string): string | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}
