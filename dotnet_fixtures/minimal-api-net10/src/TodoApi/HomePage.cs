namespace TodoApi;

// The page a browser opens at `/`: it lists the todos it fetches from the API.
public static class HomePage
{
    public const string Html = """
        <!doctype html>
        <html lang="en">
        <head><meta charset="utf-8"><title>Todo API</title></head>
        <body>
          <h1>Todo API</h1>
          <ul id="todos"><li>Loading…</li></ul>
          <script>
            fetch('/todos').then(r => r.json()).then(todos => {
              const list = document.getElementById('todos');
              list.replaceChildren(...todos.map(t => {
                const item = document.createElement('li');
                item.textContent = (t.done ? '[x] ' : '[ ] ') + t.title;
                return item;
              }));
            });
          </script>
        </body>
        </html>
        """;
}
