// A new story (the header's New): a character card (one already kept with a story, or a
// file: PNG or JSON), the player's persona, a ready campaign (RPG: HP, gold, inventory;
// or free variables), lorebooks (kept with other stories, or World Info files). One
// request makes it whole (POST /api/stories), or nothing and the reason.
//
// And Import…: what a file is, the server says by its content (POST /api/imports/kind);
// a chat or a tree file becomes a story, a card or a lorebook asks whether to start a new
// story with it or add it to the story open.

import { t } from "./i18n.js";
import { storyTitle } from "./sessions.js";
import { avatar, clear, el, toast } from "./ui.js";

/** A file's bytes as a data: URL (its base64 after the comma). */
function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function base64Of(file) {
  const url = await dataUrl(file);
  return url.slice(url.indexOf(",") + 1);
}

/** What the server says a file is: {kind, name}; throws a Problem naming why not. */
export async function kindOf(api, file) {
  const path = `/api/imports/kind?filename=${encodeURIComponent(file.name)}`;
  const { data } = await api.request("POST", path, { body: file, contentType: "application/octet-stream" });
  return data;
}

function dialogElement() {
  let dialog = document.getElementById("new-story");
  if (!dialog) {
    dialog = el("dialog.wide.new-story-dialog", { id: "new-story", "aria-labelledby": "new-story-title" });
    document.body.append(dialog);
  }
  return dialog;
}

/** A file input dressed as a button (a label: large enough to tap). */
function fileButton(label, accept, multiple, onFiles) {
  const input = el("input", { type: "file", accept, multiple, hidden: true });
  input.addEventListener("change", () => {
    const files = [...(input.files || [])];
    input.value = "";
    if (files.length) onFiles(files);
  });
  return el("label.file-button.story-upload", {}, el("span", { text: label }), input);
}

/**
 * Open the new-story dialog. `given`: {card: File} or {books: [File]} brought by
 * Import…, chosen already. Resolves with the new session, or null when cancelled.
 */
export async function openNewStory(stories, given = {}) {
  const app = stories.app;
  const dialog = dialogElement();
  const chosen = { card: null, books: new Map() }; // card: {kind: "stored"|"file", ...}
  // The dialog opens at once; the cards and books kept with stories come in when read.
  const library = Promise.all([app.api.get("/api/cards"), app.api.get("/api/lorebooks")]);

  const problem = el("p.error-text.story-problem", { role: "alert" });
  const start = el("button.primary", { type: "submit", text: t("story.start"), disabled: true });
  const cardList = el("ul.story-cards", { role: "listbox", "aria-label": t("story.character") });
  const bookList = el("ul.story-books");
  const persona = {
    name: el("input", { name: "persona_name", type: "text", maxlength: 100, autocomplete: "off" }),
    description: el("textarea", { name: "persona_description", rows: 3, maxlength: 20000 }),
  };
  const title = el("input", { name: "title", type: "text", maxlength: 500, autocomplete: "off" });
  const campaign = (value, checked) =>
    el(
      "label.story-campaign",
      {},
      el("input", { type: "radio", name: "campaign", value, checked }),
      el("span", {}, el("strong", { text: t(`story.campaign_${value}`) }), el("span.muted", { text: ` ${t(`story.campaign_${value}_hint`)}` })),
    );

  const choose = (card) => {
    chosen.card = card;
    for (const item of cardList.querySelectorAll("li")) item.setAttribute("aria-selected", String(item.dataset.key === card.key));
    start.disabled = false;
    title.placeholder = card.name;
    problem.textContent = "";
  };

  const cardItem = (card, image) => {
    const item = el(
      "li.story-card",
      { role: "option", tabindex: 0, dataset: { key: card.key }, "aria-selected": "false", onclick: () => choose(card) },
      avatar(card.name, image),
      el("span.story-card-name", { text: card.name }),
      card.kind === "file" ? el("span.muted.story-card-file", { text: card.file.name }) : null,
    );
    item.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        choose(card);
      }
    });
    return item;
  };

  const addCardFile = async (file) => {
    problem.textContent = "";
    try {
      const kind = await kindOf(app.api, file);
      if (kind.kind !== "card") {
        problem.textContent = t("story.not_a_card", { file: file.name, kind: t(`story.kind_${kind.kind}`) });
        return;
      }
      const card = { kind: "file", key: `file:${file.name}:${file.size}`, name: kind.name || file.name, file };
      const image = file.type === "image/png" || /\.png$/i.test(file.name) ? dataUrl(file).catch(() => null) : null;
      cardList.querySelector(`li[data-key="${CSS.escape(card.key)}"]`)?.remove();
      cardList.prepend(cardItem(card, image));
      choose(card);
    } catch (error) {
      problem.textContent = [error.title, error.detail].filter(Boolean).join(": ");
    }
  };

  const bookItem = (key, name, detail, checked, entry) =>
    el(
      "li",
      { dataset: { key } },
      el(
        "label",
        {},
        el("input", {
          type: "checkbox",
          checked,
          onchange: (event) => {
            if (event.target.checked) chosen.books.set(key, entry);
            else chosen.books.delete(key);
          },
        }),
        el("span", { text: name }),
        el("span.muted", { text: ` ${detail}` }),
      ),
    );

  const addBookFiles = async (files) => {
    problem.textContent = "";
    for (const file of files) {
      try {
        const kind = await kindOf(app.api, file);
        if (kind.kind !== "lorebook") {
          problem.textContent = t("story.not_a_book", { file: file.name, kind: t(`story.kind_${kind.kind}`) });
          continue;
        }
        const key = `file:${file.name}:${file.size}`;
        const entry = { kind: "file", file };
        chosen.books.set(key, entry);
        bookList.querySelector(`li[data-key="${CSS.escape(key)}"]`)?.remove();
        bookList.prepend(bookItem(key, file.name.replace(/\.json$/i, ""), t("story.book_file"), true, entry));
      } catch (error) {
        problem.textContent = [error.title, error.detail].filter(Boolean).join(": ");
      }
    }
  };

  const noCards = el("p.muted.story-none", { text: t("story.loading") });
  const noBooks = el("p.muted.story-none", { text: t("story.loading") });
  library
    .then(([cards, books]) => {
      for (const card of cards) {
        const entry = { kind: "stored", key: `stored:${card.session_id}`, name: card.name, session_id: card.session_id };
        cardList.append(cardItem(entry, card.avatar_url ? app.avatarImage(card.session_id, card.avatar_url) : null));
      }
      for (const book of books) {
        const key = `stored:${book.session_id}:${book.name}`;
        const entry = { kind: "stored", session_id: book.session_id, name: book.name };
        bookList.append(bookItem(key, book.name, t("story.book_entries", { count: book.entries }), false, entry));
      }
      noCards.textContent = t("story.no_cards");
      noBooks.textContent = t("story.no_books");
    })
    .catch((error) => {
      noCards.textContent = noBooks.textContent = "";
      app.fail(error, t("story.reading_library"));
    });

  const form = el(
    "form.new-story",
    { method: "dialog" },
    el("h3", { id: "new-story-title", text: t("story.new_title") }),
    el(
      "section.story-part",
      {},
      el("h4", { text: t("story.character") }),
      noCards,
      cardList,
      fileButton(t("story.upload_card"), ".png,.json,image/png,application/json", false, (files) => addCardFile(files[0])),
    ),
    el(
      "section.story-part",
      {},
      el("h4", { text: t("story.persona") }),
      el("label", {}, el("span", { text: t("story.persona_name") }), persona.name),
      el("label", {}, el("span", { text: t("story.persona_description") }), persona.description),
    ),
    el("section.story-part", {}, el("h4", { text: t("story.campaign") }), campaign("rpg", true), campaign("none", false)),
    el(
      "section.story-part",
      {},
      el("h4", { text: t("story.lorebooks") }),
      noBooks,
      bookList,
      fileButton(t("story.upload_books"), ".json,application/json", true, addBookFiles),
    ),
    el("section.story-part", {}, el("label", {}, el("span", { text: t("story.title_optional") }), title)),
    problem,
    el("menu", {}, el("button", { type: "button", value: "cancel", text: t("story.cancel"), onclick: () => dialog.close("cancel") }), start),
  );

  return new Promise((resolve) => {
    let made = null;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!chosen.card) return;
      start.disabled = true;
      problem.textContent = "";
      document.body.classList.add("loading");
      try {
        const body = await storyBody(chosen, persona, form, title);
        const { data } = await app.api.request("POST", "/api/stories", { json: body });
        made = data.session;
        dialog.close("made");
        await stories.opened(made);
        const swipes = data.nodes.length - 1;
        toast(t("story.started"), t(swipes > 0 ? "story.started_swipes" : "story.started_detail", { title: storyTitle(made), count: swipes }));
      } catch (error) {
        problem.textContent = [error.title, error.detail].filter(Boolean).join(": ");
        for (const item of error.doc?.errors || []) problem.textContent += `\n${[item.field, item.problem].filter(Boolean).join(": ")}`;
        start.disabled = false;
      } finally {
        document.body.classList.remove("loading");
      }
    });
    clear(dialog).append(form);
    dialog.onclose = () => resolve(made);
    dialog.returnValue = "";
    dialog.showModal();
    if (given.card) addCardFile(given.card);
    if (given.books?.length) addBookFiles(given.books);
    persona.name.focus();
  });
}

async function storyBody(chosen, persona, form, title) {
  const file = async (f) => ({ filename: f.name, data: await base64Of(f) });
  const card = chosen.card.kind === "file" ? await file(chosen.card.file) : { session_id: chosen.card.session_id };
  const lorebooks = [];
  for (const entry of chosen.books.values()) {
    lorebooks.push(entry.kind === "file" ? await file(entry.file) : { session_id: entry.session_id, name: entry.name });
  }
  const body = { card, campaign: form.elements.campaign.value, lorebooks };
  const name = persona.name.value.trim();
  if (name) body.persona = { name, description: persona.description.value };
  if (title.value.trim()) body.title = title.value.trim();
  return body;
}

/** Import…: the file told by its content, then imported where it belongs. */
export async function importByContent(stories, file) {
  const app = stories.app;
  const doing = t("story.importing", { file: file.name });
  let kind;
  try {
    kind = await kindOf(app.api, file);
  } catch (error) {
    return app.fail(error, doing);
  }
  try {
    if (kind.kind === "chat" || kind.kind === "tree") {
      const path = kind.kind === "tree" ? "/api/imports/tree" : `/api/imports/chat?filename=${encodeURIComponent(file.name)}`;
      const { data } = await app.api.request("POST", path, { body: file, contentType: "application/octet-stream" });
      await stories.opened(data.session);
      toast(t("story.imported"), t("story.imported_detail", { file: file.name, title: storyTitle(data.session) }));
      return;
    }
    const what = kind.kind === "card" ? t("story.ask_card", { name: kind.name || file.name }) : t("story.ask_book", { file: file.name });
    const current = stories.current;
    const buttons = [{ value: "new", label: t("story.ask_new") }];
    if (current) buttons.push({ value: "add", label: t("story.ask_add", { title: storyTitle(current) }) });
    const answer = await app.ask(what, [], buttons);
    if (!answer) return;
    if (answer.action === "new") {
      await openNewStory(stories, kind.kind === "card" ? { card: file } : { books: [file] });
      return;
    }
    const sid = encodeURIComponent(app.sid);
    const path =
      kind.kind === "card"
        ? `/api/sessions/${sid}/imports/card?filename=${encodeURIComponent(file.name)}`
        : `/api/sessions/${sid}/imports/lorebook?name=${encodeURIComponent(file.name)}`;
    const { data, version } = await app.api.request("POST", path, { body: file, contentType: "application/octet-stream", ifMatch: app.version });
    app.setVersion(version);
    await app.refresh();
    const imported = data.imported || {};
    toast(t("story.added"), kind.kind === "card" ? t("story.added_card", { name: imported.name || file.name }) : t("story.added_book", { name: imported.book || file.name, count: imported.entries ?? 0 }));
  } catch (error) {
    app.fail(error, doing);
    if (error.status === 412) await app.refresh();
  }
}
