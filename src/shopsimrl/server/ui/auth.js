// API calls from the UIs: same-origin fetches that carry the server's API key when it has one (serve --api-key-env).
// The key is asked for once, on the first 401, and kept in this browser's localStorage for this origin only.
"use strict";

const API_KEY_STORE = "shopsimrl-api-key";

async function apiFetch(url, options = {}) {
  const send = () => {
    const key = localStorage.getItem(API_KEY_STORE);
    const headers = {...(options.headers || {})};
    if (key) headers.Authorization = `Bearer ${key}`;
    return fetch(url, {...options, headers});
  };
  let response = await send();
  if (response.status === 401) {
    const key = window.prompt("This ShopSimRL server needs its API key (the value of the variable named by --api-key-env):");
    if (key) {
      localStorage.setItem(API_KEY_STORE, key.trim());
      response = await send();
    }
  }
  return response;
}
