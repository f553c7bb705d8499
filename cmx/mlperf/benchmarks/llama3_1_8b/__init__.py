"""The llama3.1-8b benchmark (MLPerf Inference v6.0): CNN/DailyMail summarization with Llama 3.1 8B Instruct."""
